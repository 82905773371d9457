"""LogManager on the real reactor with a real thread pool (trial TestCase)."""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet import defer, reactor
from twisted.python.threadpool import ThreadPool
from twisted.trial import unittest

from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.log_manager import LogManager

from .helpers import batch, records_of


class RealThreadsTests(unittest.TestCase):
    def setUp(self):
        self.pool = ThreadPool(minthreads=1, maxthreads=4, name="log-test")
        self.pool.start()
        self.addCleanup(self.pool.stop)
        self.data = tempfile.mkdtemp(prefix="log-threads-")
        self.addCleanup(shutil.rmtree, self.data, True)
        self.props = {"log.dirs": self.data, "log.flush.interval.messages": "1",
                      "log.segment.bytes": "50000"}

    def manager(self):
        return LogManager(KafkaConfig.from_props(self.props), reactor=reactor, threadpool=self.pool)

    @defer.inlineCallbacks
    def test_acknowledged_appends_survive_and_order_holds(self):
        manager = self.manager()
        yield manager.startService()
        log = manager.create_log("t", 0)
        sizes = [1, 300, 2, 150, 1, 400, 3]       # batches of ~100 B .. ~40 KiB records
        log.inline_write_max_bytes = 8 * 1024      # the big ones go through the pool
        acks = []
        ds = []
        for n in sizes:
            d = log.append_as_leader(batch(n, value_size=100), 0)
            d.addCallback(lambda info: acks.append((info.first_offset, log.recovery_point)))
            ds.append(d)
        yield defer.gatherResults(ds)
        firsts = [sum(sizes[:i]) for i in range(len(sizes))]
        self.assertEqual([a for a, _ in acks], firsts)                 # acked in offset order
        for (first, rp), n in zip(acks, sizes, strict=True):
            self.assertGreaterEqual(rp, first + n)                      # durable before the ack
        self.assertGreater(len(log.local_log.segments), 1)
        info = yield log.read(0, 1 << 24)
        self.assertEqual([o for o, _ in records_of(info)], list(range(sum(sizes))))
        yield manager.stopService()
        self.assertTrue(os.path.exists(os.path.join(self.data, ".kafka_cleanshutdown")))

        again = self.manager()
        yield again.startService()
        log = again.get_log("t", 0)
        self.assertEqual(log.log_end_offset, sum(sizes))
        self.assertEqual(log.recovery_stats.segments_recovered, 0)
        info = yield log.append_as_leader(batch(1), 0)
        self.assertEqual(info.first_offset, sum(sizes))
        yield again.stopService()
