"""Open-file limits: the partition budget, running out of descriptors, restarting with few of them.

Each broker here runs under a chosen ``RLIMIT_NOFILE`` (``support.nofile``).
The broker raises its soft limit to the hard one, derives a partition budget
from it (logged once), refuses creations beyond the budget, fails only the
partitions it cannot open when descriptors run out, and opens segment files
lazily -- so a broker with more partitions on disk than descriptors starts
and serves all of them.
"""

from __future__ import annotations

import json
import os
import re
import resource
import uuid

import pytest

from support.nofile import NofileBroker, nofile_limits, open_fds
from support.raw_client import Closed, RawClient
from tests.integration.admin.support import raw_request, wait_until
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

CT = m.CreateTopicsRequest
CP = m.CreatePartitionsRequest
LI = m.LeaderAndIsrRequest
_BUDGET = re.compile(r"partition budget (\d+)")
_BROKER_EPOCH = re.compile(r"Registered broker 0 with .*broker epoch: (\d+)")


@pytest.fixture
def nofile_brokers(tmp_path):
    brokers: list[NofileBroker] = []

    def make(nofile: tuple[int, int], overrides: dict[str, str] | None = None) -> NofileBroker:
        if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < nofile[1]:
            pytest.skip(f"the hard open-file limit here is below {nofile[1]}")
        broker = NofileBroker(tmp_path, overrides, nofile=nofile)
        brokers.append(broker)
        return broker.start(60)

    yield make
    for broker in brokers:
        if broker.running:
            broker.kill()


def budget_of(broker) -> int:
    line = broker.wait_for_log(_BUDGET.pattern, after=broker._log_offset_at_start)
    return int(_BUDGET.search(line)[1])


def create_topics(broker, *topics: tuple[str, int], validate_only: bool = False) -> dict:
    response = raw_request(broker, CT(topics=[CT.CreatableTopic(
        name=name, num_partitions=count, replication_factor=1, assignments=[], configs=[])
        for name, count in topics], timeout_ms=60000, validate_only=validate_only), 4)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


def grow(broker, topic: str, count: int) -> tuple[int, str | None]:
    response = raw_request(broker, CP(topics=[CP.CreatePartitionsTopic(name=topic, count=count, assignments=None)],
                                      timeout_ms=60000, validate_only=False), 1)
    return response.results[0].error_code, response.results[0].error_message


def produce_each(broker, topic: str, partitions: int, tag: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    failed = []
    for i in range(partitions):
        producer.produce(topic, value=f"{tag}-{i}".encode(), partition=i,
                         on_delivery=lambda err, msg: err is not None and failed.append(err))
    assert producer.flush(60) == 0
    assert not failed, failed[:5]


def consume_all(broker, topic: str, partitions: int, expected: int) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fd-tests", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got: dict[int, list[bytes]] = {}
    try:
        def read_some():
            for message in consumer.consume(500, timeout=1):
                assert message.error() is None, message.error()
                got.setdefault(message.partition(), []).append(message.value())
            return sum(map(len, got.values())) >= expected
        wait_until(read_some, timeout=90, interval=0, what=f"{expected} records of {topic}")
    finally:
        consumer.close()
    return got


def test_soft_limit_is_raised_and_the_partition_budget_is_enforced(nofile_brokers):
    broker = nofile_brokers((128, 512))
    assert nofile_limits(broker.pid)[0] == 512            # soft raised to hard
    line = broker.wait_for_log(_BUDGET.pattern)
    assert "512" in line and "128" in line                  # names the limit and where it came from
    budget = budget_of(broker)
    assert 0 < budget < 512

    code, message = create_topics(broker, ("over", budget + 1))["over"]
    assert code == ErrorCode.POLICY_VIOLATION and "budget" in message and str(budget) in message
    # The broker's own internal topics (__connection_events) already use part of the budget.
    from confluent_kafka.admin import AdminClient
    hosted = sum(len(t.partitions) for t in AdminClient({"bootstrap.servers": broker.bootstrap})
                 .list_topics(timeout=15).topics.values())
    free = budget - hosted
    assert create_topics(broker, ("half", free // 2))["half"][0] == 0
    assert create_topics(broker, ("rest", free - free // 2))["rest"][0] == 0
    # Full: one more partition, as a topic or by growing one, is refused; validate_only says so too.
    assert create_topics(broker, ("one", 1))["one"][0] == ErrorCode.POLICY_VIOLATION
    assert create_topics(broker, ("one", 1), validate_only=True)["one"][0] == ErrorCode.POLICY_VIOLATION
    code, message = grow(broker, "half", free // 2 + 1)
    assert code == ErrorCode.POLICY_VIOLATION and "budget" in message
    assert not [d for d in os.listdir(broker.log_dirs[0]) if d.startswith(("over-", "one-"))]
    produce_each(broker, "half", free // 2, "a")
    assert broker.stop() == 0


def test_restart_with_more_partitions_than_descriptors(nofile_brokers):
    partitions = 600
    broker = nofile_brokers((4096, 4096))
    assert create_topics(broker, ("many", partitions))["many"][0] == 0
    produce_each(broker, "many", partitions, "first")
    assert broker.stop() == 0

    broker.nofile = (256, 256)
    broker.start(120)
    assert budget_of(broker) < partitions
    assert open_fds(broker.pid) < 256
    got = consume_all(broker, "many", partitions, partitions)
    assert {p: values for p, values in got.items()} == {i: [f"first-{i}".encode()] for i in range(partitions)}
    produce_each(broker, "many", partitions, "second")
    # Over its budget the broker still refuses to add partitions, but serves the ones it has.
    assert grow(broker, "many", partitions + 1)[0] == ErrorCode.POLICY_VIOLATION
    assert broker.stop() == 0

    broker.start(120)           # a crash-free restart after all that, under the same limit
    got = consume_all(broker, "many", partitions, 2 * partitions)
    assert all(values == [f"first-{p}".encode(), f"second-{p}".encode()] for p, values in got.items())
    assert len(got) == partitions
    assert broker.stop() == 0


def _leader_and_isr(broker, topic: str, topic_id: uuid.UUID, partitions: int):
    """A LeaderAndIsr making this broker the leader of new partitions, as its controller would send it
    (the controller epoch from the controller's store, the broker epoch from the broker's log, where
    registering the broker puts it, as in Kafka)."""
    log_dir = broker.log_dirs[0]
    with open(os.path.join(log_dir, "cluster-metadata.json"), encoding="utf-8") as fh:
        controller_epoch = json.load(fh)["controller_epoch"]
    line = broker.wait_for_log(_BROKER_EPOCH.pattern, after=broker._log_offset_at_start)
    broker_epoch = int(_BROKER_EPOCH.search(line)[1])
    State = LI.LeaderAndIsrTopicState.LeaderAndIsrPartitionState
    return LI(controller_id=0, is_k_raft_controller=False, controller_epoch=controller_epoch,
              broker_epoch=broker_epoch,
              request_type=0, topic_states=[LI.LeaderAndIsrTopicState(
                  topic_name=topic, topic_id=topic_id, partition_states=[
                      State(partition_index=i, controller_epoch=controller_epoch, leader=0, leader_epoch=0, isr=[0],
                            partition_epoch=0, replicas=[0], adding_replicas=[], removing_replicas=[], is_new=True,
                            leader_recovery_state=0)
                      for i in range(partitions)])],
              live_leaders=[LI.LeaderAndIsrLiveLeader(broker_id=0, host_name="127.0.0.1", port=broker.data_port)])


def _errors(response) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partition_errors]


def test_running_out_of_descriptors_fails_the_partitions_not_the_broker(nofile_brokers):
    broker = nofile_brokers((160, 160), {"broker.id": "0"})
    topic_id = uuid.uuid4()
    request = _leader_and_isr(broker, "starved", topic_id, 8)
    control = RawClient(broker.control_port)
    hogs: list[RawClient] = []
    mark = broker.log_mark()
    try:
        # Take every descriptor the broker has left with connections: it then accepts
        # and closes new ones at once (Twisted's reserved-descriptor dance).
        while True:
            assert len(hogs) < 400, "the broker never ran out of descriptors"
            client = RawClient(broker.data_port)
            try:
                client.api_versions(timeout=5)
            except Closed:
                client.close()
                break
            hogs.append(client)
        response = control.request(request, 7)
        assert _errors(response) == [ErrorCode.KAFKA_STORAGE_ERROR] * 8
    finally:
        for client in hogs:
            client.close()
    # The broker answers again as soon as descriptors are free; one line said what failed, no traceback.
    wait_until(lambda: _answers(broker), what="the broker answering again")
    output = broker.log_text()[mark:]
    assert "Traceback" not in output
    assert len([line for line in output.splitlines() if "starved" in line]) <= 2, output[-3000:]
    # The controller's repeat (same epochs) now creates them; a restart keeps them.
    assert _errors(control.request(request, 7)) == [0] * 8
    control.close()
    assert broker.stop() == 0
    broker.start(60)
    assert broker.stop() == 0


def _answers(broker) -> bool:
    try:
        with RawClient(broker.data_port, timeout=2) as client:
            return client.api_versions().error_code == 0
    except (Closed, OSError):
        return False
