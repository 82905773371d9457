"""The group API handlers at every advertised version: what clients send goes in, what they parse comes out.

Requests are written by the clients' own encoders (aiokafka's structs where
aiokafka has the version, kafka-python's classes otherwise), decoded by the
broker's codec and served by ``KafkaApis`` with the real handlers over a
``GroupCoordinator`` on a ``task.Clock``.  The answers are parsed by
kafka-python's response classes and, where aiokafka can receive that
version, by aiokafka's structs (with their response header) -- so every
version's layout, including the ones where a field is absent, not nullable,
or moved (OffsetFetch v1/v2/v8, LeaveGroup v3, FindCoordinator v4), is what
each client reads.
"""

from __future__ import annotations

import io
import uuid

import pytest
from twisted.internet.defer import ensureDeferred

from tests.unit.coordinator.helpers import make_coordinator, subscription
from tests.unit.protocol.clients import AIOKAFKA_REQUESTS, AIOKAFKA_RESPONSES, aiokafka_request_frame
from tests.unit.protocol.schema_values import build_object, to_positional
from twisted_kafka.coordinator.group.topic import OFFSETS_TOPIC
from twisted_kafka.network.listeners import EndPoint
from twisted_kafka.network.request import Request, RequestContext, SendResponse
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_request
from twisted_kafka.protocol.registry import REGISTRY, ApiKey
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.handlers.find_coordinator import FindCoordinatorHandler
from twisted_kafka.server.handlers.group import HeartbeatHandler, JoinGroupHandler, LeaveGroupHandler, SyncGroupHandler
from twisted_kafka.server.handlers.group_admin import DeleteGroupsHandler, DescribeGroupsHandler, ListGroupsHandler
from twisted_kafka.server.handlers.offsets import OffsetCommitHandler, OffsetDeleteHandler, OffsetFetchHandler
from twisted_kafka.server.kafka_apis import KafkaApis
from twisted_kafka.server.metadata_cache import BrokerRegistration, MetadataCache, PartitionState

CONTEXT = RequestContext(connection_id="c", listener_name="PLAINTEXT", security_protocol="PLAINTEXT", plane="data",
                         client_host="127.0.0.1", client_port=5555)


class FakeGroupService:
    def __init__(self, coordinator):
        self.coordinator = coordinator

    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    def offsets_topic_exists(self) -> bool:
        return True

    async def ensure_offsets_topic(self):
        return 0


class Broker:
    def __init__(self):
        self.coordinator, self.writer, self.clock = make_coordinator(partitions=3)
        cache = MetadataCache(listeners=None)  # type: ignore[arg-type]
        cache.update_brokers([BrokerRegistration(0, {"PLAINTEXT": EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT")})], 0)
        states = [PartitionState("t", p, 0, 0, (0,), (0,)) for p in range(2)]
        states += [PartitionState(OFFSETS_TOPIC, p, 0, 0, (0,), (0,)) for p in range(3)]
        cache.update_partitions(states, {"t": uuid.uuid4(), OFFSETS_TOPIC: uuid.uuid4()}, frozenset({OFFSETS_TOPIC}))
        c = self.coordinator
        auth = ALLOW_ALL
        self.apis = KafkaApis([
            FindCoordinatorHandler(FakeGroupService(c), None, cache, authorization=auth),
            JoinGroupHandler(c), SyncGroupHandler(c),
            HeartbeatHandler(c), LeaveGroupHandler(c), OffsetCommitHandler(c, cache, self.clock, authorization=auth),
            OffsetFetchHandler(c, authorization=auth), OffsetDeleteHandler(c, cache, authorization=auth),
            DescribeGroupsHandler(c, authorization=auth), ListGroupsHandler(c, authorization=auth),
            DeleteGroupsHandler(c, authorization=auth)], authorization=auth)

    def call(self, api_key: int, version: int, values: dict, client: str = "auto"):
        """Send ``values`` as the client would; returns (kafka-python response, aiokafka response or None)."""
        spec = REGISTRY[api_key]
        ak_request = AIOKAFKA_REQUESTS.get((api_key, version))
        if ak_request is not None and client != "kafka-python":
            args = to_positional(ak_request.SCHEMA, spec.request_class._struct, version, values)
            frame = aiokafka_request_frame(ak_request, args, version, 7, "client-1")
        else:
            body = build_object(spec.request_class, spec.request_class._struct, version, values)
            body.with_header(correlation_id=7, client_id="client-1")
            frame = bytes(body.encode(header=True))
        header, body = decode_request(frame)
        request = Request(context=CONTEXT, header=header, body=body, spec=spec, size=len(frame))
        d = ensureDeferred(self.apis.handle(request))
        self.clock.advance(0)
        response = d.result
        assert isinstance(response, SendResponse), response
        raw = b"".join(bytes(c) for c in response.chunks)
        kp = spec.response_class.decode(raw[4:], version=version, header=True)
        ak = None
        ak_response = AIOKAFKA_RESPONSES.get((api_key, version))
        if ak_request is not None and ak_response is not None:
            stream = io.BytesIO(raw[4:])
            object.__new__(ak_request).parse_response_header(stream)
            ak = ak_response.decode(stream)
            assert stream.read() == b"", "aiokafka left bytes unread"
            for name, value in ak.to_object().items():     # top-level scalars both clients read alike
                if isinstance(value, (int, str)) and hasattr(kp, name):
                    assert getattr(kp, name) == value, (name, getattr(kp, name), value)
        return kp, ak


def versions(api_key: ApiKey) -> list[int]:
    spec = REGISTRY[api_key]
    return list(range(spec.min_version, spec.max_version + 1))


def join_values(version: int, member_id: str = "", group: str = "g") -> dict:
    return dict(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
                group_instance_id=None, protocol_type="consumer", reason=None,
                protocols=[dict(name="range", metadata=subscription("t"))])


def joined(broker: Broker, version: int, group: str = "g"):
    """A member of ``group`` joined (and synced) at JoinGroup ``version``; returns (member id, generation)."""
    kp, _ = broker.call(ApiKey.JOIN_GROUP, version, join_values(version, group=group))
    if version >= 4:
        assert kp.error_code == 79 and kp.member_id
        kp, _ = broker.call(ApiKey.JOIN_GROUP, version, join_values(version, kp.member_id, group=group))
    assert kp.error_code == 0, kp
    member, generation = kp.member_id, kp.generation_id
    sync, _ = broker.call(ApiKey.SYNC_GROUP, 3, dict(group_id=group, generation_id=generation, member_id=member,
                                                     group_instance_id=None, assignments=[
                                                         dict(member_id=member, assignment=b"A")]))
    assert sync.error_code == 0
    return member, generation


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator(version):
    broker = Broker()
    if version >= 4:
        kp, _ = broker.call(ApiKey.FIND_COORDINATOR, version, dict(key_type=0, coordinator_keys=["g", "h"]))
        assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in kp.coordinators] == [
            ("g", 0, "h", 9092, 0), ("h", 0, "h", 9092, 0)]
        return
    kp, ak = broker.call(ApiKey.FIND_COORDINATOR, version, dict(key="g", key_type=0))
    assert (kp.error_code, kp.node_id, kp.host, kp.port) == (0, 0, "h", 9092)
    if ak is not None:
        assert tuple(ak.to_object().values())[-3:] == (0, "h", 9092)


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_join_group(version):
    broker = Broker()
    kp, ak = broker.call(ApiKey.JOIN_GROUP, version, join_values(version))
    if version >= 4:
        assert kp.error_code == 79 and kp.protocol_name in ("", None)
        kp, ak = broker.call(ApiKey.JOIN_GROUP, version, join_values(version, kp.member_id))
    assert (kp.error_code, kp.generation_id, kp.protocol_name, kp.leader) == (0, 1, "range", kp.member_id)
    assert [(j.member_id, bytes(j.metadata)) for j in kp.members] == [(kp.member_id, subscription("t"))]
    if version >= 7:
        assert kp.protocol_type == "consumer"
    bad = dict(join_values(version), session_timeout_ms=1)
    bad_kp, _ = broker.call(ApiKey.JOIN_GROUP, version, bad)
    assert bad_kp.error_code == 26 and bad_kp.protocol_name in ("", None)


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
def test_sync_group(version):
    broker = Broker()
    kp, _ = broker.call(ApiKey.JOIN_GROUP, 3, join_values(3))
    member = kp.member_id
    values = dict(group_id="g", generation_id=1, member_id=member, group_instance_id=None, protocol_type="consumer",
                  protocol_name="range", assignments=[dict(member_id=member, assignment=b"assigned")])
    kp, ak = broker.call(ApiKey.SYNC_GROUP, version, values)
    assert (kp.error_code, bytes(kp.assignment)) == (0, b"assigned")
    if version >= 5:
        assert (kp.protocol_type, kp.protocol_name) == ("consumer", "range")
        missing, _ = broker.call(ApiKey.SYNC_GROUP, version, dict(values, protocol_name=None), client="kafka-python")
        assert missing.error_code == 23


@pytest.mark.parametrize("version", versions(ApiKey.HEARTBEAT))
def test_heartbeat(version):
    broker = Broker()
    member, generation = joined(broker, 3)
    values = dict(group_id="g", generation_id=generation, member_id=member, group_instance_id=None)
    assert broker.call(ApiKey.HEARTBEAT, version, values)[0].error_code == 0
    assert broker.call(ApiKey.HEARTBEAT, version, dict(values, generation_id=9))[0].error_code == 22
    assert broker.call(ApiKey.HEARTBEAT, version, dict(values, member_id="x"))[0].error_code == 25


@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
def test_leave_group(version):
    broker = Broker()
    member, _ = joined(broker, 3)
    if version < 3:
        kp, _ = broker.call(ApiKey.LEAVE_GROUP, version, dict(group_id="g", member_id="nobody"))
        assert kp.error_code == 25                   # the only member's error is the request's
        kp, _ = broker.call(ApiKey.LEAVE_GROUP, version, dict(group_id="g", member_id=member))
        assert kp.error_code == 0
    else:
        kp, _ = broker.call(ApiKey.LEAVE_GROUP, version, dict(group_id="g", members=[
            dict(member_id=member, group_instance_id=None, reason="done"),
            dict(member_id="nobody", group_instance_id=None, reason=None)]))
        assert kp.error_code == 0
        assert [(r.member_id, r.error_code) for r in kp.members] == [(member, 0), ("nobody", 25)]
    assert broker.coordinator.group("g").size == 0


def commit_values(version: int, member: str, generation: int, metadata: str = "m") -> dict:
    return dict(group_id="g", generation_id_or_member_epoch=generation, member_id=member, group_instance_id=None,
                retention_time_ms=-1, topics=[
                    dict(name="t", partitions=[
                        dict(partition_index=0, committed_offset=5, committed_leader_epoch=3, commit_timestamp=-1,
                             committed_metadata=metadata),
                        dict(partition_index=7, committed_offset=1, committed_leader_epoch=-1, commit_timestamp=-1,
                             committed_metadata=None)]),
                    dict(name="nope", partitions=[dict(partition_index=0, committed_offset=1,
                                                       committed_leader_epoch=-1, commit_timestamp=-1,
                                                       committed_metadata=None)])])


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit(version):
    broker = Broker()
    member, generation = joined(broker, 3)
    kp, _ = broker.call(ApiKey.OFFSET_COMMIT, version, commit_values(version, member, generation))
    errors = {(t.name, p.partition_index): p.error_code for t in kp.topics for p in t.partitions}
    assert errors == {("t", 0): 0, ("t", 7): 3, ("nope", 0): 3}
    _, fetched = broker.coordinator.fetch_offsets("g", False, [("t", 0)])
    assert (fetched[("t", 0)].offset, fetched[("t", 0)].metadata) == (5, "m")
    assert fetched[("t", 0)].leader_epoch == (3 if version >= 6 else -1)
    stale, _ = broker.call(ApiKey.OFFSET_COMMIT, version, commit_values(version, member, generation + 1))
    assert stale.topics[0].partitions[0].error_code == 22
    unknown_group = dict(commit_values(version, member, 1), group_id="unknown")
    error = broker.call(ApiKey.OFFSET_COMMIT, version, unknown_group)[0].topics[0].partitions[0].error_code
    assert error == (69 if version >= 9 else 22)     # GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch(version):
    broker = Broker()
    member, generation = joined(broker, 3)
    broker.call(ApiKey.OFFSET_COMMIT, 8, commit_values(8, member, generation, metadata="meta"))
    topics = [dict(name="t", partition_indexes=[0, 1])]
    if version >= 8:
        kp, _ = broker.call(ApiKey.OFFSET_FETCH, version, dict(groups=[
            dict(group_id="g", member_id=None, member_epoch=-1, topics=topics),
            dict(group_id="other", member_id=None, member_epoch=-1, topics=None),
            dict(group_id="", member_id=None, member_epoch=-1, topics=None)], require_stable=True))
        g, other, empty = kp.groups
        assert g.error_code == 0 and [(p.partition_index, p.committed_offset, p.metadata)
                                      for p in g.topics[0].partitions] == [(0, 5, "meta"), (1, -1, "")]
        assert (other.error_code, other.topics) == (0, [])
        assert empty.error_code == 0
        return
    kp, ak = broker.call(ApiKey.OFFSET_FETCH, version, dict(group_id="g", topics=topics, require_stable=True))
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for p in kp.topics[0].partitions] == [(0, 5, "meta", 0), (1, -1, "", 0)]
    if version >= 5:
        assert kp.topics[0].partitions[0].committed_leader_epoch == 3
    if version >= 2:
        everything, _ = broker.call(ApiKey.OFFSET_FETCH, version, dict(group_id="g", topics=None,
                                                                      require_stable=False))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in everything.topics] == [("t", [0])]
    # a group this broker does not coordinate: v1 puts the error on each partition, v2+ at the top
    broker.coordinator.on_resignation(broker.coordinator.partition_for("g"), 5)
    kp, _ = broker.call(ApiKey.OFFSET_FETCH, version, dict(group_id="g", topics=topics, require_stable=False))
    if version < 2:
        assert {p.error_code for p in kp.topics[0].partitions} == {16}
    else:
        assert kp.error_code == 16 and kp.topics == []


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_DELETE))
def test_offset_delete(version):
    broker = Broker()
    broker.call(ApiKey.OFFSET_COMMIT, 8, commit_values(8, "", -1))
    kp, _ = broker.call(ApiKey.OFFSET_DELETE, version, dict(group_id="g", topics=[
        dict(name="t", partitions=[dict(partition_index=0), dict(partition_index=9)])]))
    assert kp.error_code == 0
    assert [(p.partition_index, p.error_code) for p in kp.topics[0].partitions] == [(0, 0), (9, 3)]
    missing, _ = broker.call(ApiKey.OFFSET_DELETE, version, dict(group_id="nope", topics=[
        dict(name="t", partitions=[dict(partition_index=0)])]))
    assert (missing.error_code, missing.topics) == (69, [])


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
def test_describe_groups(version):
    broker = Broker()
    member, _ = joined(broker, 3)
    kp, ak = broker.call(ApiKey.DESCRIBE_GROUPS, version, dict(groups=["g"], include_authorized_operations=True))
    (g,) = kp.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
    (only,) = g.members
    assert (only.member_id, only.client_id, only.client_host) == (member, "client-1", "/127.0.0.1")
    assert (bytes(only.member_metadata), bytes(only.member_assignment)) == (subscription("t"), b"A")
    if version >= 3:
        assert g.authorized_operations == {3, 6, 8}
    missing, _ = broker.call(ApiKey.DESCRIBE_GROUPS, version, dict(groups=["nope"],
                                                                    include_authorized_operations=False))
    (gone,) = missing.groups
    assert (gone.error_code, gone.group_state) == ((69, "Dead") if version >= 6 else (0, "Dead"))


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
def test_list_groups(version):
    broker = Broker()
    joined(broker, 3)
    broker.call(ApiKey.OFFSET_COMMIT, 8, dict(commit_values(8, "", -1), group_id="simple"))
    kp, _ = broker.call(ApiKey.LIST_GROUPS, version, dict(states_filter=[], types_filter=[]))
    assert sorted((g.group_id, g.protocol_type) for g in kp.groups) == [("g", "consumer"), ("simple", "")]
    if version >= 4:
        stable, _ = broker.call(ApiKey.LIST_GROUPS, version, dict(states_filter=["STABLE"], types_filter=[]))
        assert [(g.group_id, g.group_state) for g in stable.groups] == [("g", "Stable")]
    if version >= 5:
        assert {g.group_type for g in kp.groups} == {"classic"}


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_GROUPS))
def test_delete_groups(version):
    broker = Broker()
    joined(broker, 3)
    broker.call(ApiKey.OFFSET_COMMIT, 8, dict(commit_values(8, "", -1), group_id="simple"))
    kp, _ = broker.call(ApiKey.DELETE_GROUPS, version, dict(groups_names=["g", "simple", "nope", "simple"]))
    assert [(r.group_id, r.error_code) for r in kp.results] == [("g", 68), ("simple", 0), ("nope", 69)]


def test_every_group_api_is_served_at_its_whole_range():
    served = set(Broker().apis.served_keys)
    assert served == {ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
                      ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE,
                      ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.DELETE_GROUPS}
    assert m.OffsetDeleteRequest.API_KEY == ApiKey.OFFSET_DELETE
