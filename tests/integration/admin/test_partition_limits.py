"""How many partitions one request may create: refused before any work, the broker unharmed.

Kafka's controller refuses a request that would generate more than 10,000
metadata records (one per partition) with POLICY_VIOLATION (KAFKA-14996);
the broker checks the count before it plans a single partition, so a
36-byte CreatePartitions asking for 33,554,432 partitions costs nothing.
"""

from __future__ import annotations

import os
import time

import psutil
import pytest

from support.raw_client import RawClient
from tests.integration.admin.support import error_code, outcomes, raw_request
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import encode_request
from twisted_kafka.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

CT = m.CreateTopicsRequest
CP = m.CreatePartitionsRequest


def create_topic(broker, name: str, partitions: int) -> int:
    response = raw_request(broker, CT(topics=[CT.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=30000, validate_only=False), 4)
    return response.topics[0].error_code


def partition_count(client: RawClient, topic: str) -> int:
    metadata = client.metadata(version=1, topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)])
    [entry] = metadata.topics
    assert entry.error_code == 0
    return len(entry.partitions)


def partition_dirs(broker, topic: str) -> list[str]:
    return [name for name in os.listdir(broker.log_dirs[0]) if name.startswith(f"{topic}-")]


def test_create_partitions_for_33554432_partitions_is_refused_at_once(broker_factory):
    broker = broker_factory()
    assert create_topic(broker, "huge", 1) == 0
    process = psutil.Process(broker.pid)
    rss_before = process.memory_info().rss
    request = CP(topics=[CP.CreatePartitionsTopic(name="huge", count=33_554_432, assignments=None)],
                 timeout_ms=5000, validate_only=False)
    assert len(b"".join(encode_request(request, 0, 1, None))) <= 40     # a tiny request
    try:
        with RawClient(broker.data_port, timeout=5) as client:
            began = time.monotonic()
            response = client.request(request, 0)
            elapsed = time.monotonic() - began
            [result] = response.results
            assert (result.name, result.error_code) == ("huge", ErrorCode.POLICY_VIOLATION)
            assert "10000" in result.error_message and "33554431" in result.error_message
            assert elapsed < 1.0, f"refusing took {elapsed:.3f}s"
            # The same connection and a new one are served; nothing was added.
            assert client.api_versions().error_code == 0
            assert partition_count(client, "huge") == 1
        with RawClient(broker.data_port, timeout=5) as other:
            assert partition_count(other, "huge") == 1
        grew = process.memory_info().rss - rss_before
        assert grew < 32 * 1024 * 1024, f"RSS grew by {grew / 2**20:.1f} MiB"
    except BaseException:
        broker.kill()      # a broker planning 33 million partitions would not stop on SIGTERM
        raise
    assert partition_dirs(broker, "huge") == ["huge-0"]
    assert broker.stop() == 0


def test_create_topics_of_25000_partitions_is_refused_before_any_work(broker_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})
    fds_before = len(psutil.Process(broker.pid).open_files())
    began = time.monotonic()
    results = outcomes(admin.create_topics([NewTopic("t25k", 25_000, 1)], operation_timeout=30))
    elapsed = time.monotonic() - began
    assert error_code(results["t25k"]) == ErrorCode.POLICY_VIOLATION
    assert "10000" in str(results["t25k"])
    assert elapsed < 5, f"refusing took {elapsed:.3f}s"
    # The bound is per request: two topics of 6,000 partitions in one request are refused together.
    results = outcomes(admin.create_topics([NewTopic("t6k-a", 6_000, 1), NewTopic("t6k-b", 6_000, 1)],
                                           operation_timeout=30))
    assert {name: error_code(r) for name, r in results.items()} == {
        "t6k-a": ErrorCode.POLICY_VIOLATION, "t6k-b": ErrorCode.POLICY_VIOLATION}
    # Nothing was created, no file was opened, and the broker still answers.
    for topic in ("t25k", "t6k-a", "t6k-b"):
        assert partition_dirs(broker, topic) == []
    assert len(psutil.Process(broker.pid).open_files()) <= fds_before
    with RawClient(broker.data_port) as client:
        names = {t.name for t in client.metadata(version=1, topics=None).topics}
    assert not names & {"t25k", "t6k-a", "t6k-b"}
    outcomes(admin.create_topics([NewTopic("small", 3, 1)], operation_timeout=30))
    assert partition_dirs(broker, "small")
    # ...and restarts.
    broker.restart()
    with RawClient(broker.data_port) as client:
        assert partition_count(client, "small") == 3
