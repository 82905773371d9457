"""The group coordinator inside a single-node broker: the offsets topic, its records, and a restart.

The harness's broker (real logs, replica manager, controller) with the real
``GroupCoordinatorService``: FindCoordinator creates ``__consumer_offsets``
as Kafka does, commits become records of Kafka's format in its log, and a
broker started again on the same directory replays them.
"""

from __future__ import annotations

from twisted_kafka.coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from twisted_kafka.coordinator.group.topic import OFFSETS_TOPIC, partition_for
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.batch import iter_batch_headers
from twisted_kafka.protocol.records.record import iter_records

from .helpers import Broker, decode, records, result_of

PROPS = {"offsets.topic.num.partitions": "5", "group.initial.rebalance.delay.ms": "0"}
J = m.JoinGroupRequest


def find(node, group: str = "g"):
    return node.call(m.FindCoordinatorRequest(key=group, key_type=0), 3)


def join(node, member_id: str = ""):
    request, pending = node.pending(J(
        group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00")]), 5)
    node.reactor.advance(0)         # the (zero) initial rebalance delay is a timer
    return decode(request, result_of(pending))


def commit(node, member: str, generation: int, offset: int, metadata: str = "md"):
    R = m.OffsetCommitRequest
    return node.call(R(group_id="g", generation_id_or_member_epoch=generation, member_id=member,
                       group_instance_id=None, topics=[R.OffsetCommitRequestTopic(name="t", partitions=[
                           R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                               partition_index=0, committed_offset=offset, committed_leader_epoch=2,
                               committed_metadata=metadata)])]), 8)


def stored(node, partition: int) -> list:
    log = node.log(OFFSETS_TOPIC, partition)
    info = result_of(log.read(0, 1 << 20))
    out = []
    for chunk in info.records:
        buf = bytes(chunk)
        for pos, header in iter_batch_headers(buf):
            out.extend(iter_records(buf, pos, header))
    return out


def test_find_coordinator_creates_the_offsets_topic_as_kafka_does(tmp_path):
    node = Broker(tmp_path, PROPS)
    response = find(node)
    assert (response.error_code, response.node_id, response.host, response.port) == (0, 0, "127.0.0.1", 9092)
    topic = node.metadata_cache.topics[OFFSETS_TOPIC]
    assert topic.is_internal and len(topic.partitions) == 5
    assert all(p.replicas == (0,) for p in topic.partitions.values())    # offsets.topic.replication.factor 3, capped
    assert node.config_repository.topic_overrides(OFFSETS_TOPIC) == {"cleanup.policy": "compact",
                                                                     "segment.bytes": "104857600"}
    assert node.group_coordinator.coordinator.manager.owned_partitions == set(range(5))
    # clients may not write to it
    node.create_topic("t")
    P = m.ProduceRequest
    produced = node.call(P(acks=-1, timeout_ms=1000, transactional_id=None, topic_data=[P.TopicProduceData(
        name=OFFSETS_TOPIC, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=records(b"x"))])]),
        9)
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_metadata_auto_creation_of_internal_topics(tmp_path):
    node = Broker(tmp_path, PROPS)
    MT = m.MetadataRequest.MetadataRequestTopic
    body = node.call(m.MetadataRequest(topics=[MT(name=OFFSETS_TOPIC), MT(name="__transaction_state")],
                                       allow_auto_topic_creation=True), 12)
    errors = {t.name: (t.error_code, t.is_internal, len(t.partitions)) for t in body.topics}
    # each internal topic as its owner (the group and the transaction coordinator) defines it
    assert errors == {OFFSETS_TOPIC: (0, True, 5), "__transaction_state": (0, True, 50)}
    assert node.config_repository.topic_overrides("__transaction_state")["cleanup.policy"] == "compact"
    assert node.config_repository.topic_overrides(OFFSETS_TOPIC)["cleanup.policy"] == "compact"


def test_commits_are_kafka_records_and_a_restarted_broker_replays_them(tmp_path):
    node = Broker(tmp_path, PROPS)
    find(node)
    node.create_topic("t")
    first = join(node)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = join(node, first.member_id)
    member, generation = joined.member_id, joined.generation_id
    S = m.SyncGroupRequest
    synced = node.call(S(group_id="g", generation_id=generation, member_id=member, group_instance_id=None,
                         protocol_type="consumer", protocol_name="range",
                         assignments=[S.SyncGroupRequestAssignment(member_id=member, assignment=b"A")]), 5)
    assert synced.error_code == 0
    assert commit(node, member, generation, 41).topics[0].partitions[0].error_code == 0
    assert commit(node, member, generation, 42, "last").topics[0].partitions[0].error_code == 0

    partition = partition_for("g", 5)
    kinds = [(decode_key(r.key), r.value) for r in stored(node, partition)]
    assert [type(k).__name__ for k, _ in kinds] == ["GroupMetadataKey", "OffsetCommitKey", "OffsetCommitKey"]
    group_key, group_value = kinds[0]
    assert group_key == GroupMetadataKey("g")
    value = decode_group_metadata_value(group_value)
    assert (value.generation, value.protocol, value.leader) == (generation, "range", member)
    assert [(mv.member_id, mv.assignment, mv.client_host) for mv in value.members] == [(member, b"A", "/127.0.0.1")]
    offset_key, offset_value = kinds[-1]
    assert offset_key == OffsetCommitKey("g", "t", 0)
    assert offset_value[:2] == b"\x00\x03"                  # OffsetCommitValue v3, as Kafka 2.3+ writes it
    decoded = decode_offset_commit_value(offset_value)
    assert (decoded.offset, decoded.metadata, decoded.leader_epoch) == (42, "last", 2)

    # the same log directory, a new broker: it replays the partition it leads
    again = Broker(tmp_path, PROPS)
    group = again.group_coordinator.coordinator.group("g")
    assert group is not None and group.generation_id == generation and list(group.members) == [member]
    R = m.OffsetFetchRequest
    fetched = again.call(R(groups=[R.OffsetFetchRequestGroup(group_id="g", topics=[
        R.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])],
        require_stable=True), 8)
    (p,) = fetched.groups[0].topics[0].partitions
    assert (p.committed_offset, p.metadata, p.committed_leader_epoch, p.error_code) == (42, "last", 2, 0)
    # the member carries on in its generation
    H = m.HeartbeatRequest
    assert again.call(H(group_id="g", generation_id=generation, member_id=member, group_instance_id=None),
                      4).error_code == 0
