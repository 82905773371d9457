"""A group coordinator on a ``task.Clock`` with an in-memory offsets log, and member helpers.

``FakeWriter`` stands for the offsets topic: every append becomes a real v2
batch (the bytes the broker would write) kept per partition, so the loader
can replay exactly what was written.  With ``hold=True`` appends wait until
``release()``: a commit that is not yet durable.
"""

from __future__ import annotations

import struct

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from twisted_kafka.coordinator.group.config import GroupConfig, OffsetConfig
from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.coordinator.group.group import OffsetAndMetadata
from twisted_kafka.coordinator.group.loader import LoadedPartition, batches_of, replay
from twisted_kafka.protocol.errors import KafkaError
from twisted_kafka.protocol.records.builder import build_batch

START_MS = 1_700_000_000_000


class FakeWriter:
    def __init__(self):
        self.batches: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.hold = False
        self.fail_with: KafkaError | None = None
        self.held: list[tuple[Deferred, int]] = []
        self.appends = 0

    def append(self, partition: int, records, timestamp_ms: int) -> Deferred:
        self.appends += 1
        if self.fail_with is not None:
            return fail(Failure(self.fail_with))
        base = self.next_offset.get(partition, 0)
        batch = build_batch([(k, v, None, timestamp_ms) for k, v in records], base_offset=base)
        self.batches.setdefault(partition, []).append(batch)
        self.next_offset[partition] = base + len(records)
        if self.hold:
            d: Deferred = Deferred()
            self.held.append((d, base))
            return d
        return succeed(base)

    def release(self) -> None:
        held, self.held = self.held, []
        for d, base in held:
            d.callback(base)

    def replay(self, partition: int) -> LoadedPartition:
        return replay(batches_of(self.batches.get(partition, [])))


def make_coordinator(*, partitions: int = 1, min_session: int = 10, max_session: int = 600_000,
                     max_size: int = 2 ** 31 - 1, initial_delay: int = 0, metadata_max: int = 4096,
                     writer: FakeWriter | None = None, clock: Clock | None = None, own: bool = True):
    clock = clock or Clock()
    if not clock.seconds():
        clock.advance(START_MS / 1000)
    writer = writer or FakeWriter()
    coordinator = GroupCoordinator(
        group_config=GroupConfig(min_session_timeout_ms=min_session, max_session_timeout_ms=max_session,
                                 max_size=max_size, initial_rebalance_delay_ms=initial_delay),
        offset_config=OffsetConfig(topic_num_partitions=partitions, max_metadata_size=metadata_max),
        writer=writer, clock=clock)  # type: ignore[arg-type]
    coordinator.startup()
    if own:
        for p in range(partitions):
            coordinator.on_election(p, 0, lambda p=p: succeed(writer.replay(p)))
    return coordinator, writer, clock


def run(clock: Clock, seconds: float, step: float = 0.05) -> None:
    """Advance ``clock`` by ``seconds`` in small steps: ``Clock.advance`` runs timers set during the
    advance relative to its end, so a timer chain (a delay that reschedules itself) needs steps."""
    steps = round(seconds / step)
    for _ in range(steps):
        clock.advance(step)
    clock.advance(seconds - steps * step)


def subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (version, topics, user data null)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


def offsets(*entries, metadata: str = "", now: int = START_MS):
    return {(topic, partition): OffsetAndMetadata(offset, metadata, now) for topic, partition, offset in entries}


class Member:
    """One group member driving the coordinator the way a client does."""

    def __init__(self, coordinator: GroupCoordinator, group_id: str = "g", *, client_id: str = "c",
                 instance_id: str | None = None, protocols=None, session_ms: int = 10_000,
                 rebalance_ms: int = 30_000, topics=("t",)):
        self.coordinator = coordinator
        self.group_id = group_id
        self.client_id = client_id
        self.instance_id = instance_id
        self.protocols = protocols if protocols is not None else [("range", subscription(*topics)),
                                                                  ("roundrobin", subscription(*topics))]
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.member_id = ""
        self.generation = -1
        self.join_result = None
        self.sync_result = None

    def join(self, *, require_known: bool = True) -> Deferred:
        d = self.coordinator.join_group(
            self.group_id, self.member_id, self.instance_id, require_known_member_id=require_known,
            support_skip_assignment=False, client_id=self.client_id, client_host="/127.0.0.1",
            rebalance_timeout_ms=self.rebalance_ms, session_timeout_ms=self.session_ms, protocol_type="consumer",
            protocols=self.protocols)
        d.addCallback(self._joined)
        return d

    def _joined(self, result):
        self.join_result = result
        if result.member_id:
            self.member_id = result.member_id
        if result.error == 0:
            self.generation = result.generation_id
        return result

    def join_with_id(self) -> Deferred:
        """JoinGroup v4+: a new member is told MEMBER_ID_REQUIRED first, then rejoins with its id."""
        first = self.join()
        if self.instance_id is None:
            assert first.called and first.result.error == 79, first.result
            return self.join()
        return first

    def sync(self, assignments: dict[str, bytes] | None = None) -> Deferred:
        d = self.coordinator.sync_group(self.group_id, self.generation, self.member_id, "consumer", None,
                                        self.instance_id, assignments or {})
        d.addCallback(self._synced)
        return d

    def _synced(self, result):
        self.sync_result = result
        return result

    def heartbeat(self):
        return self.coordinator.heartbeat(self.group_id, self.member_id, self.instance_id, self.generation)

    def commit(self, entries, metadata: str = "", generation: int | None = None) -> Deferred:
        gen = self.generation if generation is None else generation
        return self.coordinator.commit_offsets(self.group_id, self.member_id, self.instance_id, gen,
                                               offsets(*entries, metadata=metadata))

    def leave(self):
        return self.coordinator.leave_group(self.group_id, [(self.member_id, self.instance_id, "bye")])
