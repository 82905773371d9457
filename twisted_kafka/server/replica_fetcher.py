"""ReplicaFetcher: one follower connection to one leader, fetching every partition it follows there.

Kafka's ``ReplicaFetcherThread`` as a loop on the reactor.  Each round sends
one Fetch (v12, topic names) to the leader's inter-broker listener with
``replica_id`` = this broker, each partition's fetch offset = this log's end
(so the leader learns where the follower is), its current leader epoch
(KIP-320 fencing), ``replica.fetch.max.bytes`` per partition,
``replica.fetch.response.max.bytes`` in all, ``replica.fetch.min.bytes``
and ``replica.fetch.wait.max.ms`` (the leader holds the fetch until data
arrives).  Returned batches are appended as they are, offsets and epochs
kept, and the follower takes the leader's high watermark.

The fetches use an incremental fetch session (KIP-227,
``client/fetch_session.py``): after the first full fetch each request names
only the partitions whose fetch state (log end, leader epoch, log start)
changed -- those that just got records -- and forgets those not fetched
this round (backed off, removed); the leader answers only partitions with
records, errors or a new high watermark or log start.  An idle follower of
many partitions thus sends and receives a few bytes a round.  A session
error (FETCH_SESSION_ID_NOT_FOUND after the leader restarted or evicted it,
INVALID_FETCH_SESSION_EPOCH) or a lost answer makes the next fetch a full one.

Before a partition's first fetch under a new leader epoch it is truncated
(KIP-101, KIP-279): OffsetForLeaderEpoch (23) asks the leader where this
log's last epoch ends on its side, and the follower drops anything beyond
that, which a previous leader wrote and the new one does not have.  A fetch
answered OFFSET_OUT_OF_RANGE is resolved as Kafka does: a follower ahead of
the leader truncates to the leader's log end, one behind the leader's log
start restarts its log there.  A partition answered FENCED_LEADER_EPOCH or
NOT_LEADER_OR_FOLLOWER waits for the controller's next LeaderAndIsr; any
other error backs the partition off ``replica.fetch.backoff.ms``.  A lost
connection backs the whole fetcher off and reconnects.
"""

from __future__ import annotations

from dataclasses import dataclass

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.error import ConnectingCancelledError
from twisted.logger import Logger

from twisted_kafka.client import KafkaClientProtocol, KafkaConnectionError, connect
from twisted_kafka.client.fetch_session import FetchSessionHandler
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .partition import Partition

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4

FR = m.FetchRequest
OR = m.OffsetForLeaderEpochRequest


@dataclass
class FetchState:
    """One partition as its fetcher sees it."""

    partition: Partition
    leader_epoch: int
    truncated: bool = False         # OffsetForLeaderEpoch done for this leader epoch
    delayed_until: float = 0.0      # backed off after an error (reactor seconds)

    @property
    def key(self) -> tuple[str, int]:
        return (self.partition.topic, self.partition.index)


class ReplicaFetcher:
    log = Logger(namespace="twisted_kafka.server.ReplicaFetcher")

    def __init__(self, *, source_broker: int, fetcher_id: int, broker_id: int, config, reactor,
                 endpoint, replica_manager, tls=None, sasl=None):
        """``endpoint(broker_id)``: the leader's (host, port, security protocol) on the replication
        listener, or None while it is not known; ``tls(security_protocol)``: the ``ClientTls`` of an
        SSL listener (None: plain); ``sasl(security_protocol)``: the ``SaslClientConfig`` of a SASL one."""
        self.tls = tls
        self.sasl = sasl
        self.source_broker = source_broker
        self.fetcher_id = fetcher_id
        self.broker_id = broker_id
        self.config = config
        self.reactor = reactor
        self.endpoint = endpoint
        self.replicas = replica_manager
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._client: KafkaClientProtocol | None = None
        self._running = False
        self._wakeup: Deferred | None = None
        self._sleep_call = None
        self._loop: Deferred | None = None
        self.rounds = 0
        #: The incremental fetch session (KIP-227) with the leader.
        self.session = FetchSessionHandler()

    def __repr__(self) -> str:
        return f"<ReplicaFetcher {self.fetcher_id} of broker {self.source_broker}>"

    # -- partitions -----------------------------------------------------------------------

    def add_partition(self, partition: Partition) -> None:
        self.partitions[(partition.topic, partition.index)] = FetchState(partition, partition.leader_epoch)
        self._wake()

    def remove_partition(self, partition: Partition) -> None:
        self.partitions.pop((partition.topic, partition.index), None)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if not self._running:
            self._running = True
            self._loop = ensureDeferred(self._run())
            self._loop.addErrback(lambda f: self.log.failure("{fetcher} stopped", f, fetcher=self))

    def stop(self) -> Deferred | None:
        self._running = False
        self._close()
        self._wake()
        return self._loop

    def _close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.called:
            d, self._wakeup = self._wakeup, None
            if self._sleep_call is not None and self._sleep_call.active():
                self._sleep_call.cancel()
            self._sleep_call = None
            d.callback(None)

    def _sleep(self, seconds: float | None) -> Deferred:
        """Wait ``seconds`` (None: until woken); ``add_partition`` and ``stop`` wake it early."""
        d: Deferred = Deferred()
        self._wakeup = d
        if seconds is not None:
            self._sleep_call = self.reactor.callLater(max(seconds, 0.0), self._wake)
        return d

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.config["replica.fetch.backoff.ms"] / 1000.0
        while self._running:
            now = self.reactor.seconds()
            ready = [s for s in self.partitions.values() if s.delayed_until <= now]
            if not ready:
                later = [s.delayed_until for s in self.partitions.values()]
                await self._sleep(min(later) - now if later else None)
                continue
            try:
                client = await self._connected()
                if client is None:
                    await self._sleep(backoff)
                    continue
                for state in ready:
                    if not state.truncated:
                        await self._truncate(client, state)
                ready = [s for s in ready if s.truncated and s.delayed_until <= now and self.partitions.get(s.key) is s]
                if ready:
                    await self._fetch(client, ready)
                    self.rounds += 1
            except (KafkaConnectionError, CancelledError, ConnectingCancelledError) as exc:
                self._close()
                if self._running:
                    self.log.info("{fetcher}: {error}; retrying in {backoff} s", fetcher=self, error=exc,
                                  backoff=backoff)
                    await self._sleep(backoff)
            except Exception:
                self._close()
                self.log.failure("{fetcher} failed a round; retrying", fetcher=self)
                if self._running:
                    await self._sleep(backoff)

    async def _connected(self) -> KafkaClientProtocol | None:
        if self._client is not None and self._client.is_open:
            return self._client
        self._close()
        where = self.endpoint(self.source_broker)
        if where is None:
            self.log.info("{fetcher}: the leader's replication listener is not known yet", fetcher=self)
            return None
        host, port, security_protocol = where
        tls = self.tls(security_protocol) if self.tls is not None else None
        sasl = self.sasl(security_protocol) if self.sasl is not None else None
        self._client = await connect(self.reactor, host, port, client_id=f"broker-{self.broker_id}-fetcher-"
                                     f"{self.fetcher_id}", timeout=self.config["replica.socket.timeout.ms"] / 1000,
                                     security_protocol=security_protocol, name=f"broker {self.source_broker}",
                                     max_response_size=self.config["replica.fetch.response.max.bytes"]
                                     + self.config["replica.fetch.max.bytes"] + 1024 * 1024, tls=tls,
                                     sasl=sasl)
        return self._client

    async def _request(self, client: KafkaClientProtocol, body, version: int):
        d = client.request(body, version)
        timeout = (self.config["replica.socket.timeout.ms"] + self.config["replica.fetch.wait.max.ms"]) / 1000.0
        d.addTimeout(timeout, self.reactor)
        return await d

    # -- truncation (KIP-101, KIP-279) --------------------------------------------------------

    async def _truncate(self, client: KafkaClientProtocol, state: FetchState) -> None:
        partition = state.partition
        log = partition.log
        epoch = log.latest_epoch
        if epoch < 0:
            state.truncated = True                # nothing written under any epoch: nothing to drop
            return
        response = await self._request(client, OR(replica_id=self.broker_id, topics=[OR.OffsetForLeaderTopic(
            topic=partition.topic, partitions=[OR.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=partition.index, current_leader_epoch=state.leader_epoch, leader_epoch=epoch)])]),
            OFFSET_FOR_LEADER_EPOCH_VERSION)
        if self.partitions.get(state.key) is not state:
            return
        answer = response.topics[0].partitions[0]
        error = ErrorCode(answer.error_code)
        if error != ErrorCode.NONE:
            self._partition_error(state, error)
            return
        end = answer.end_offset
        if answer.leader_epoch < 0 or end < 0:
            # The leader knows no epoch at or before ours: keep nothing it might not have (Kafka truncates
            # to the high watermark then).
            end = partition.high_watermark
        elif answer.leader_epoch < epoch:
            # Our last epoch is unknown to the leader: our log must end where its largest smaller epoch ends.
            end = min(end, log.end_offset_for_epoch(answer.leader_epoch)[1])
        if log.has_writes_in_flight:
            # Appends this broker made as the previous leader are still being written: truncate after them.
            state.delayed_until = self.reactor.seconds() + 0.05
            return
        if end < log.log_end_offset:
            self.log.info("Truncating {topic}-{partition} to {offset} (its log ended at {end}) for leader epoch "
                          "{epoch}", topic=partition.topic, partition=partition.index, offset=end,
                          end=log.log_end_offset, epoch=state.leader_epoch)
            log.truncate_to(end)
        state.truncated = True

    # -- fetching ---------------------------------------------------------------------------

    async def _fetch(self, client: KafkaClientProtocol, ready: list[FetchState]) -> None:
        config = self.config
        max_bytes = config["replica.fetch.max.bytes"]
        # Each partition's fetch state; the session handler sends only those the leader's session lacks.
        wanted = {s.key: (s.partition.log.log_end_offset, s.leader_epoch, s.partition.log.log_start_offset, max_bytes)
                  for s in ready}
        data = self.session.build(wanted)
        by_topic: dict[str, list] = {}
        for (topic, index), (offset, epoch, log_start, limit) in data.to_send.items():
            by_topic.setdefault(topic, []).append(FR.FetchTopic.FetchPartition(
                partition=index, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=log_start, partition_max_bytes=limit))
        forgotten: dict[str, list[int]] = {}
        for topic, index in data.to_forget:
            forgotten.setdefault(topic, []).append(index)
        request = FR(replica_id=self.broker_id, max_wait_ms=config["replica.fetch.wait.max.ms"],
                     min_bytes=config["replica.fetch.min.bytes"], max_bytes=config["replica.fetch.response.max.bytes"],
                     isolation_level=0, session_id=data.session_id, session_epoch=data.epoch,
                     topics=[FR.FetchTopic(topic=t, partitions=p) for t, p in by_topic.items()],
                     forgotten_topics_data=[FR.ForgottenTopic(topic=t, partitions=p) for t, p in forgotten.items()],
                     rack_id="")
        sent = {s.key: s for s in ready}
        try:
            response = await self._request(client, request, FETCH_VERSION)
        except BaseException:
            self.session.handle_error()
            raise
        carried = {(topic.topic, answer.partition_index) for topic in response.responses for answer in topic.partitions}
        if not self.session.handle_response(response.error_code, response.session_id, carried):
            if response.error_code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
                self.log.info("{fetcher}: {error}; the next fetch is a full one", fetcher=self,
                              error=ErrorCode(response.error_code).name)
                return
            if response.error_code:
                raise KafkaError(ErrorCode(response.error_code), "the leader refused the fetch")
            self.log.warn("{fetcher}: the leader answered partitions the fetch did not ask for; the next fetch "
                          "is a full one", fetcher=self)
            return
        for topic in response.responses:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition_index)
                found = sent.get(key)
                if found is None or self.partitions.get(key) is not found:
                    continue                       # removed (or re-added) while the fetch was out
                error = ErrorCode(answer.error_code)
                if error == ErrorCode.NONE:
                    self._append(found, wanted[key][0], answer)
                elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._out_of_range(client, found)
                else:
                    self._partition_error(found, error)

    def _append(self, state: FetchState, fetch_offset: int, answer) -> None:
        partition = state.partition
        log = partition.log
        if log.log_end_offset != fetch_offset:
            return          # the log moved (truncated) since the fetch was sent: fetch again
        records = answer.records
        if records is not None and not isinstance(records, bytes | bytearray | memoryview):
            records = bytes(records)
        try:
            self.replicas.append_as_follower(partition, records or b"", answer.high_watermark)
        except KafkaError as exc:
            self.log.warn("Cannot append the leader's records to {topic}-{partition} at {offset}: {error}",
                          topic=partition.topic, partition=partition.index, offset=fetch_offset, error=exc)
            state.delayed_until = self.reactor.seconds() + self.config["replica.fetch.backoff.ms"] / 1000.0

    async def _out_of_range(self, client: KafkaClientProtocol, state: FetchState) -> None:
        """Kafka's ``handleOutOfRangeError``: compare with the leader's log end and start (ListOffsets)."""
        partition = state.partition
        LO = m.ListOffsetsRequest
        ends = {}
        for timestamp in (-1, -2):
            response = await self._request(client, LO(replica_id=self.broker_id, isolation_level=0, topics=[
                LO.ListOffsetsTopic(name=partition.topic, partitions=[LO.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition.index, current_leader_epoch=state.leader_epoch,
                    timestamp=timestamp)])]), 7)
            answer = response.topics[0].partitions[0]
            if answer.error_code:
                self._partition_error(state, ErrorCode(answer.error_code))
                return
            ends[timestamp] = answer.offset
        log = partition.log
        if self.partitions.get(state.key) is not state or log.has_writes_in_flight:
            return
        leader_end, leader_start = ends[-1], ends[-2]
        if log.log_end_offset > leader_end:
            self.log.warn("{topic}-{partition} is ahead of its leader ({end} > {leader_end}): truncating",
                          topic=partition.topic, partition=partition.index, end=log.log_end_offset,
                          leader_end=leader_end)
            log.truncate_to(leader_end)
        elif log.log_end_offset < leader_start:
            self.log.info("{topic}-{partition} is behind its leader's log start {start}: starting over there",
                          topic=partition.topic, partition=partition.index, start=leader_start)
            log.truncate_fully_and_start_at(leader_start)

    def _partition_error(self, state: FetchState, error: ErrorCode) -> None:
        partition = state.partition
        if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID):
            # The leader moved on (or has not heard of its leadership yet): retried after a back-off, and
            # replaced by the controller's next LeaderAndIsr.
            self.log.info("Fetching {topic}-{partition} from broker {leader}: {error}; backing off",
                          topic=partition.topic, partition=partition.index, leader=self.source_broker,
                          error=error.name)
        else:
            self.log.warn("Fetching {topic}-{partition} from broker {leader}: {error}; backing off",
                          topic=partition.topic, partition=partition.index, leader=self.source_broker,
                          error=error.name)
        state.delayed_until = self.reactor.seconds() + self.config["replica.fetch.backoff.ms"] / 1000.0


__all__ = ["ReplicaFetcher", "FetchState", "FETCH_VERSION"]
