"""Requests a group must refuse, on the wire: each gets Kafka's error code, and the group goes on.

Two members speak the group protocol on raw connections (JoinGroup v5,
SyncGroup v3, Heartbeat v3, OffsetCommit v8), so each request and its error
code are exactly what is on the wire.  Refused along the way:

* a commit from an old generation (ILLEGAL_GENERATION, 22);
* a commit from a member id the group does not have (UNKNOWN_MEMBER_ID, 25);
* commit metadata over ``offset.metadata.max.bytes`` (OFFSET_METADATA_TOO_LARGE,
  12, for that partition only -- the other partition of the request commits);
* a JoinGroup with a session timeout outside
  [group.min.session.timeout.ms, group.max.session.timeout.ms]
  (INVALID_SESSION_TIMEOUT, 26);
* a third member while ``group.max.size`` is 2 (GROUP_MAX_SIZE_REACHED, 81);
* a SyncGroup naming another protocol (INCONSISTENT_GROUP_PROTOCOL, 23);
* a heartbeat and a commit from a member whose session expired
  (UNKNOWN_MEMBER_ID, 25).

After each, the first member's heartbeats and commits still succeed, and
after the expiry it is alone in the next generation.
"""

from __future__ import annotations

import struct

from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m

from .conftest import create_topic

BROKER_OVERRIDES = {"group.max.size": "2", "offset.metadata.max.bytes": "64",
                    "group.max.session.timeout.ms": "30000"}
TOPIC = "bad-input"
GROUP = "bad-input-group"

ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, OFFSET_METADATA_TOO_LARGE = 22, 25, 12
INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED, MEMBER_ID_REQUIRED = 26, 81, 79
INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS = 23, 27


def subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


class RawMember:
    """A group member on one raw connection (blocking, one request at a time unless sent early)."""

    def __init__(self, port: int, session_ms: int = 10000):
        self.client = RawClient(port).connect()
        self.session_ms = session_ms
        self.member_id = ""
        self.generation = -1

    def join_request(self, session_ms: int | None = None):
        J = m.JoinGroupRequest
        return J(version=5, group_id=GROUP, session_timeout_ms=session_ms or self.session_ms,
                 rebalance_timeout_ms=10000, member_id=self.member_id, group_instance_id=None,
                 protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range",
                                                                                 metadata=subscription(TOPIC))])

    def join(self, session_ms: int | None = None):
        response = self.client.request(self.join_request(session_ms), 5)
        if response.error_code == MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            response = self.client.request(self.join_request(session_ms), 5)
        return self._joined(response)

    def send_join(self) -> None:
        self.client.send_request(self.join_request(), 5)

    def read_join(self):
        _, response = self.client.read_response(11, 5, timeout=15)
        return self._joined(response)

    def _joined(self, response):
        if response.error_code == 0:
            self.member_id, self.generation = response.member_id, response.generation_id
        return response

    def sync(self, assignments: dict[str, bytes] | None = None, protocol_name: str | None = None):
        S = m.SyncGroupRequest
        request = S(version=5, group_id=GROUP, generation_id=self.generation, member_id=self.member_id,
                    group_instance_id=None, protocol_type="consumer", protocol_name=protocol_name or "range",
                    assignments=[S.SyncGroupRequestAssignment(member_id=k, assignment=v)
                                 for k, v in (assignments or {}).items()])
        return self.client.request(request, 5)

    def heartbeat(self) -> int:
        return self.client.request(m.HeartbeatRequest(version=3, group_id=GROUP, generation_id=self.generation,
                                                      member_id=self.member_id, group_instance_id=None),
                                   3).error_code

    def commit(self, offsets: dict[int, tuple[int, str]], *, generation: int | None = None,
               member_id: str | None = None) -> dict[int, int]:
        R = m.OffsetCommitRequest
        P = R.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        request = R(version=8, group_id=GROUP,
                    generation_id_or_member_epoch=self.generation if generation is None else generation,
                    member_id=self.member_id if member_id is None else member_id, group_instance_id=None,
                    topics=[R.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                        P(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=md)
                        for p, (o, md) in offsets.items()])])
        response = self.client.request(request, 8)
        return {p.partition_index: p.error_code for p in response.topics[0].partitions}

    def close(self) -> None:
        self.client.close()


def committed(port: int) -> dict[int, tuple[int, str]]:
    R = m.OffsetFetchRequest
    with RawClient(port) as client:
        response = client.request(R(version=8, groups=[R.OffsetFetchRequestGroup(
            group_id=GROUP, topics=[R.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                name=TOPIC, partition_indexes=[0, 1])])], require_stable=True), 8)
    (group,) = response.groups
    assert group.error_code == 0
    return {p.partition_index: (p.committed_offset, p.metadata) for p in group.topics[0].partitions}


def test_bad_requests_get_kafkas_errors_and_the_group_keeps_working(group_broker):
    port = group_broker.data_port
    create_topic(group_broker.bootstrap, TOPIC, 2)
    with RawClient(port) as client:     # the first lookup creates __consumer_offsets and finds this broker
        found = client.request(m.FindCoordinatorRequest(version=3, key=GROUP, key_type=0), 3)
        assert (found.error_code, found.port) == (0, port)
    a, b = RawMember(port), RawMember(port, session_ms=1500)
    try:
        first = a.join()
        assert first.error_code == 0 and first.leader == a.member_id and a.generation == 1
        assert a.sync({a.member_id: b"all"}).assignment == b"all"

        # b joins: a learns of the rebalance from its heartbeat and rejoins; one new generation
        response = b.client.request(b.join_request(), 5)
        assert response.error_code == MEMBER_ID_REQUIRED
        b.member_id = response.member_id
        b.send_join()
        assert a.heartbeat() == REBALANCE_IN_PROGRESS
        a.send_join()
        assert a.read_join().error_code == 0 and b.read_join().error_code == 0
        assert a.generation == b.generation == 2
        assert a.sync({a.member_id: b"p0", b.member_id: b"p1"}).error_code == 0
        assert b.sync().assignment == b"p1"

        # stale generation, unknown member
        assert a.commit({0: (5, "")}, generation=1) == {0: ILLEGAL_GENERATION}
        assert a.commit({0: (5, "")}, member_id="no-such-member") == {0: UNKNOWN_MEMBER_ID}
        # metadata too large for one partition: the other one commits
        assert a.commit({0: (7, "x" * 65), 1: (9, "ok")}) == {0: OFFSET_METADATA_TOO_LARGE, 1: 0}
        assert committed(port) == {0: (-1, ""), 1: (9, "ok")}
        # session timeouts out of bounds: refused before anything else
        for bad in (999, 30001):
            response = RawMember(port).client.request(RawMember(port).join_request(bad), 5)
            assert response.error_code == INVALID_SESSION_TIMEOUT, bad
        # a third member: the group is at group.max.size
        c = RawMember(port)
        assert c.client.request(c.join_request(), 5).error_code == GROUP_MAX_SIZE_REACHED
        c.close()
        # a SyncGroup naming another protocol
        assert a.sync(protocol_name="roundrobin").error_code == INCONSISTENT_GROUP_PROTOCOL
        assert a.heartbeat() == 0 and b.heartbeat() == 0
        assert a.commit({0: (10, "a")}) == {0: 0}

        # b goes silent: its session expires, a is rebalanced alone
        error = wait_until(lambda: a.heartbeat(), timeout=10, what="b's session to expire", interval=0.3)
        assert error == REBALANCE_IN_PROGRESS
        assert a.join().error_code == 0 and a.generation == 3
        assert a.sync({a.member_id: b"p0,p1"}).assignment == b"p0,p1"
        assert b.heartbeat() == UNKNOWN_MEMBER_ID
        assert b.commit({1: (11, "b")}) == {1: UNKNOWN_MEMBER_ID}
        assert a.commit({0: (12, "a"), 1: (13, "a")}) == {0: 0, 1: 0}
        assert a.heartbeat() == 0
        assert committed(port) == {0: (12, "a"), 1: (13, "a")}
    finally:
        a.close()
        b.close()
