"""DescribeLogDirs (35): the broker's log directories, the size and lag of each partition, and the cluster check."""

from __future__ import annotations

import os
import shutil

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import Broker
from .test_authorization import ALICE, AUTHORIZER, CLUSTER, Op, allow, grant

D = m.DescribeLogDirsRequest
DT = D.DescribableLogDirTopic


def partitions(body) -> dict:
    return {(r.log_dir, t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
            for r in body.results for t in r.topics for p in t.partitions}


def test_every_directory_with_its_partitions_sizes_and_space(tmp_path):
    second = str(tmp_path / "logs2")
    node = Broker(tmp_path, {"log.dirs": f"{tmp_path / 'logs'},{second}"})
    node.create_topic("t", 2)
    node.produce("t", 0, b"a" * 100, b"b" * 100)
    body = node.call(D(topics=None), 4)
    assert body.error_code == ErrorCode.NONE
    assert {r.log_dir for r in body.results} == {os.path.abspath(tmp_path / "logs"), os.path.abspath(second)}
    found = partitions(body)
    sizes = {(t, p): size for (_, t, p), (size, _, _) in found.items()}
    assert sizes[("t", 0)] == node.log("t", 0).size > 200 and sizes[("t", 1)] == 0
    assert all(lag == 0 and not future for _, lag, future in found.values())
    for (log_dir, topic, partition) in found:
        assert node.log_manager.log_dir_of(topic, partition) == log_dir
    for result in body.results:
        usage = shutil.disk_usage(result.log_dir)
        assert result.error_code == ErrorCode.NONE and result.total_bytes == usage.total
        assert 0 < result.usable_bytes <= usage.total


def test_named_partitions_only(node):
    node.create_topic("t", 2)
    node.create_topic("u")
    body = node.call(D(topics=[DT(topic="t", partitions=[1]), DT(topic="missing", partitions=[0])]), 2)
    assert [(t, p) for _, t, p in partitions(body)] == [("t", 1)]
    assert len(body.results) == 1 and body.results[0].log_dir == os.path.abspath(node.log_dir)


def test_needs_describe_on_the_cluster(tmp_path):
    node = Broker(tmp_path, {"authorizer.class.name": AUTHORIZER})
    node.create_topic("t")
    refused = node.call(D(topics=None), 3, principal=ALICE)
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and refused.results == []
    grant(node, allow(CLUSTER, "kafka-cluster", Op.DESCRIBE))
    assert [t for _, t, _ in partitions(node.call(D(topics=None), 3, principal=ALICE))] == ["t"]
