"""Kafka's ``kafka.server:type=BrokerTopicMetrics`` meters, per topic and broker-wide.

The meters every Kafka dashboard graphs first -- MessagesInPerSec,
BytesInPerSec, BytesOutPerSec, ... -- exist once per topic (tag ``topic``)
and once for the whole broker (no tag), as Kafka's ``BrokerTopicStats``
keeps them.  Each is recorded at one place on the data path:

* produce (``ReplicaManager.append``, leader appends, the coordinators' own
  writes included, as Kafka's ``appendToLocalLog``): TotalProduceRequestsPerSec
  once per partition appended to; after a successful append BytesInPerSec
  (the batches' size) and MessagesInPerSec (records appended); a failed append
  marks FailedProduceRequestsPerSec unless its error is one Kafka calls
  expected (``EXPECTED_PRODUCE_ERRORS``), and a batch refused for its size
  (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE) marks BytesRejectedPerSec with
  its bytes;
* fetch (the Fetch handler, on the answer it sends): TotalFetchRequestsPerSec
  once per partition, BytesOutPerSec with the records returned to a consumer,
  ReplicationBytesOutPerSec with those returned to a follower;
  FailedFetchRequestsPerSec for a read that failed unexpectedly;
* replication (``ReplicaManager.append_as_follower``):
  ReplicationBytesInPerSec with the bytes a follower appends.

Kafka keeps the two replication meters broker-wide only; here they exist per
topic too (what is replicating is the first question when they climb), and
the broker-wide ones are there under Kafka's name for dashboards written for
Kafka.

Recording costs one dictionary lookup per partition and a few integer
additions: a topic's meters are one ``TopicMetrics`` object, each ``mark``
adds to a count, and rates are computed when read.  A deleted topic's meters
go when its last hosted partition is deleted (Kafka's ``removeMetrics``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from twisted_kafka.metrics import Meter, MetricName
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

GROUP, TYPE = "kafka.server", "BrokerTopicMetrics"

#: The meters of a topic, by Kafka's name (attribute name -> metric name).
METERS = {
    "messages_in": "MessagesInPerSec",
    "bytes_in": "BytesInPerSec",
    "bytes_out": "BytesOutPerSec",
    "bytes_rejected": "BytesRejectedPerSec",
    "total_produce": "TotalProduceRequestsPerSec",
    "failed_produce": "FailedProduceRequestsPerSec",
    "total_fetch": "TotalFetchRequestsPerSec",
    "failed_fetch": "FailedFetchRequestsPerSec",
    "replication_bytes_in": "ReplicationBytesInPerSec",
    "replication_bytes_out": "ReplicationBytesOutPerSec",
}

#: Produce errors that do not count as failed requests: Kafka's ``appendToLocalLog`` marks
#: FailedProduceRequestsPerSec only for unexpected failures, not for these.
EXPECTED_PRODUCE_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INVALID_TOPIC_EXCEPTION,
})
#: Batches refused for their size: their bytes are BytesRejectedPerSec.
SIZE_ERRORS = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})


class Meters:
    """The meters of one topic, or of the whole broker (``topic`` None)."""

    __slots__ = ("topic", *METERS)

    def __init__(self, topic: str | None, clock: Callable[[], float]):
        self.topic = topic
        self.messages_in = Meter(clock)
        self.bytes_in = Meter(clock)
        self.bytes_out = Meter(clock)
        self.bytes_rejected = Meter(clock)
        self.total_produce = Meter(clock)
        self.failed_produce = Meter(clock)
        self.total_fetch = Meter(clock)
        self.failed_fetch = Meter(clock)
        self.replication_bytes_in = Meter(clock)
        self.replication_bytes_out = Meter(clock)

    def meters(self) -> Iterator[tuple[MetricName, Meter]]:
        tags = () if self.topic is None else (("topic", self.topic),)
        for attribute, name in METERS.items():
            yield MetricName(GROUP, TYPE, name, tags), getattr(self, attribute)


class TopicMetrics(Meters):
    """One topic's meters; each record marks the broker-wide meter too."""

    __slots__ = ("broker",)

    def __init__(self, topic: str, broker: Meters, clock: Callable[[], float]):
        super().__init__(topic, clock)
        self.broker = broker

    # -- produce --------------------------------------------------------------------------

    def produce_started(self) -> None:
        self.total_produce.mark()
        self.broker.total_produce.mark()

    def appended(self, info):
        """A callback of the append's Deferred (a ``LogAppendInfo``: its batches' bytes and records)."""
        if info.num_records:
            size, count, broker = info.valid_bytes, info.num_records, self.broker
            self.bytes_in.mark(size)
            self.messages_in.mark(count)
            broker.bytes_in.mark(size)
            broker.messages_in.mark(count)
        return info

    def append_failed(self, failure, size: int):
        """An errback of the append's Deferred (the failure goes on)."""
        self.produce_failed(failure.value, size)
        return failure

    def produce_failed(self, error: BaseException, size: int) -> None:
        code = error.code if isinstance(error, KafkaError) else None
        if code in SIZE_ERRORS:
            self.bytes_rejected.mark(size)
            self.broker.bytes_rejected.mark(size)
        if code not in EXPECTED_PRODUCE_ERRORS:
            self.failed_produce.mark()
            self.broker.failed_produce.mark()

    # -- fetch ----------------------------------------------------------------------------

    def fetched(self, nbytes: int, follower: bool) -> None:
        """One partition of a Fetch answer: ``nbytes`` of records sent to a consumer or a follower."""
        broker = self.broker
        self.total_fetch.mark()
        broker.total_fetch.mark()
        if nbytes:
            if follower:
                self.replication_bytes_out.mark(nbytes)
                broker.replication_bytes_out.mark(nbytes)
            else:
                self.bytes_out.mark(nbytes)
                broker.bytes_out.mark(nbytes)

    def fetch_failed(self) -> None:
        self.failed_fetch.mark()
        self.broker.failed_fetch.mark()

    # -- replication ----------------------------------------------------------------------

    def replicated(self, nbytes: int) -> None:
        """A follower appended ``nbytes`` of its leader's batches."""
        if nbytes:
            self.replication_bytes_in.mark(nbytes)
            self.broker.replication_bytes_in.mark(nbytes)


class BrokerTopicStats:
    """Every topic's ``TopicMetrics`` and the broker-wide one (``all_topics``).

    A ``MetricSource`` of the broker's ``MetricsRegistry``, and a leadership
    listener of the ``ReplicaManager`` (a deleted topic's meters go); both are
    set up by ``broker_metrics.register_broker_metrics``.  Meters exist only for
    topics this broker hosts: what a client names that is not hosted here is
    never recorded, so requests cannot make the broker keep meters for
    made-up topic names.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.all_topics = Meters(None, clock)
        self._topics: dict[str, TopicMetrics] = {}
        #: Partitions hosted per topic: a topic's meters go when the last of its partitions is deleted.
        self._hosted: dict[str, set[int]] = {}

    def topic(self, name: str) -> TopicMetrics:
        metrics = self._topics.get(name)
        if metrics is None:
            metrics = self._topics[name] = TopicMetrics(name, self.all_topics, self._clock)
        return metrics

    def get(self, name: str) -> TopicMetrics | None:
        return self._topics.get(name)

    def topics(self) -> dict[str, TopicMetrics]:
        return dict(self._topics)

    def remove(self, name: str) -> None:
        self._topics.pop(name, None)

    def __call__(self) -> Iterator[tuple[MetricName, Meter]]:
        """The ``MetricSource``: the broker-wide meters and every topic's."""
        yield from self.all_topics.meters()
        for metrics in list(self._topics.values()):
            yield from metrics.meters()

    def fetched(self, names: list[str | None], topics: list, *, follower: bool) -> None:
        """A Fetch answer (``FetchableTopicResponse`` per requested topic, named by ``names``): each
        partition answered without error -- so led here -- counts once, with its records' bytes."""
        for name, topic in zip(names, topics, strict=True):
            metrics = None
            for entry in topic.partitions:
                if entry.error_code or name is None:
                    continue
                if metrics is None:
                    metrics = self.topic(name)
                records = entry.records
                nbytes = sum(len(chunk) for chunk in records) if isinstance(records, list) else len(records or b"")
                metrics.fetched(nbytes, follower)

    # -- the ReplicaManager's leadership listener --------------------------------------------

    def on_leader(self, partition) -> None:
        self._hosted.setdefault(partition.topic, set()).add(partition.index)

    def on_follower(self, partition) -> None:
        self._hosted.setdefault(partition.topic, set()).add(partition.index)

    def on_stopped(self, topic: str, index: int, deleted: bool) -> None:
        hosted = self._hosted.get(topic)
        if hosted is not None:
            hosted.discard(index)
        if deleted and not hosted:
            self._hosted.pop(topic, None)
            self.remove(topic)
