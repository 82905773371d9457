"""A full log directory, on a real small filesystem (an 8 MiB tmpfs mounted by the test).

While the directory is full:

* appends fail with KAFKA_STORAGE_ERROR, and the log stays consistent
  (nothing half-written is ever read, offsets stay contiguous);
* reads keep working: a consumer reads every acknowledged record;
* DeleteRecords and DeleteTopics succeed (the metadata and checkpoint writes
  they need come out of the space reserve kept in every log dir);
* once space is back (the deleted data is removed after
  ``log.segment.delete.delay.ms``) the broker accepts appends again by
  itself, without a restart;
* a crash and restart afterwards lose nothing acknowledged.

The test is skipped only when it cannot mount a tmpfs (it needs root).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.raw_client import RawClient
from support.reading import read_to_end
from support.wait import wait_until
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.builder import build_batch

from .helpers import produce_request
from .test_durability import log_end_offsets, read_all

MIB = 1024 * 1024
OVERRIDES = {
    "num.partitions": "1",
    "log.segment.bytes": str(256 * 1024),
    "log.segment.delete.delay.ms": "300",
}


def mount_tmpfs(path: str, size: str = "8m") -> None:
    os.makedirs(path, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path} (needs root): {result.stderr.strip()}")


def unmount(path: str) -> None:
    if subprocess.run(["umount", path], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True)


@pytest.fixture
def small_disk_broker(broker_factory):
    broker = broker_factory(OVERRIDES, start=False)
    mount = broker.log_dirs[0]
    mount_tmpfs(mount)
    try:
        broker.start()
        yield broker
    finally:
        if broker.running:
            broker.kill()
        unmount(mount)


def read_from(bootstrap: str, topic: str, offset: int, timeout: float = 20) -> list:
    """(offset, key, value) of partition 0 of ``topic`` from ``offset`` to its end."""
    return read_to_end(bootstrap, topic, [0], start=offset, timeout=timeout)[0]


def fill_up(path: str) -> None:
    """Write ``path`` until the filesystem has no byte left."""
    with open(path, "wb", buffering=0) as fh:
        for size in (MIB, 4096, 1):
            while True:
                try:
                    fh.write(b"\0" * size)
                except OSError:
                    break


def value(n: int, size: int) -> bytes:
    seed = n.to_bytes(4, "big")
    return (seed * (size // 4 + 1))[:size]


def produce(client: RawClient, topic: str, records: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """(error code, base offset) of one acks=all Produce of one batch."""
    response = client.request(produce_request({topic: {0: build_batch(records)}}))
    (entry,) = response.responses[0].partition_responses
    return entry.error_code, entry.base_offset


def batch_of(first: int, count: int = 8, size: int = 8 * 1024) -> list[tuple[bytes, bytes]]:
    return [(str(first + i).encode(), value(first + i, size)) for i in range(count)]


def test_full_disk_refuses_appends_keeps_reads_and_deletes_and_resumes_by_itself(small_disk_broker):
    broker = small_disk_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(t, 1) for t in ("keep", "victim", "trim")]).values():
        future.result(10)
    acked: dict[int, tuple[bytes, bytes]] = {}          # offset of "keep" -> (key, value)
    with RawClient(broker.data_port) as client:
        # Data that deleting will free later: 1.5 MiB in "victim", 1.5 MiB in "trim".
        for topic in ("victim", "trim"):
            for n in range(0, 192, 8):
                assert produce(client, topic, batch_of(n)) == (0, n)

        # Fill the disk through "keep" until appends fail.
        n = 0
        errors = []
        deadline = time.monotonic() + 60
        while len(errors) < 3:
            assert time.monotonic() < deadline, "the disk never filled up"
            records = batch_of(n)
            error, base = produce(client, "keep", records)
            if error == 0:
                assert base == n, "offsets must stay contiguous across failed appends"
                acked.update({base + i: r for i, r in enumerate(records)})
                n += len(records)
            else:
                errors.append(error)
        assert set(errors) == {ErrorCode.KAFKA_STORAGE_ERROR}, errors
        assert len(acked) > 100
        assert log_end_offsets(broker, "keep", 1) == {0: n}

        # Whatever the failed appends left free, another program takes: not a byte is left.
        fill_up(os.path.join(broker.log_dirs[0], "ballast"))
        assert os.statvfs(broker.log_dirs[0]).f_bavail == 0

        # Reads work while the disk is full: everything acknowledged is there.
        (read,) = read_all(broker.bootstrap, "keep", 1).values()
        assert [(o, (k, v)) for o, k, v in read] == sorted(acked.items())

        # DeleteTopics and DeleteRecords work while full (the files they rewrite
        # take the space reserve).
        admin.delete_topics(["victim"])["victim"].result(10)
        assert "victim" not in admin.list_topics(timeout=10).topics
        (low,) = admin.delete_records([TopicPartition("trim", 0, 96)]).values()
        assert low.result(10).low_watermark == 96
        assert "released the space reserve" in broker.log_text()

        # The deleted data goes after log.segment.delete.delay.ms; then appends resume
        # by themselves, without a restart.
        def appended():
            records = batch_of(n)
            error, base = produce(client, "keep", records)
            assert error in (0, ErrorCode.KAFKA_STORAGE_ERROR), error
            return (base, records) if error == 0 else None

        base, records = wait_until(appended, timeout=30, what="appends to resume after space came back",
                                   interval=0.2)
        assert base == n
        acked.update({base + i: r for i, r in enumerate(records)})
        n += len(records)
        assert produce(client, "trim", batch_of(192)) == (0, 192)
    assert "appends resume" in broker.log_text()

    # A crash now loses nothing acknowledged.
    broker.kill()
    broker.start()
    (read,) = read_all(broker.bootstrap, "keep", 1).values()
    assert [(o, (k, v)) for o, k, v in read] == sorted(acked.items())
    assert [o for o, _, _ in read_from(broker.bootstrap, "trim", 96)] == list(range(96, 200))
    assert "victim" not in admin.list_topics(timeout=10).topics
    with RawClient(broker.data_port) as client:
        assert produce(client, "keep", batch_of(n)) == (0, n)
