"""The driver's view of the brokers: which partitions a query reads and their offsets.

Asked with librdkafka's AdminClient (confluent-kafka): Metadata for the
topics and partitions, ListOffsets for each partition's earliest offset
(the log start offset, which retention and DeleteRecords move forward) and
latest offset (the high watermark, or the last stable offset with
``kafka.isolation.level=read_committed``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .options import Subscription

__all__ = ["OffsetReader", "INTERNAL_TOPICS"]

#: Topics a pattern never matches (as Kafka's consumer with exclude.internal.topics=true):
#: Kafka's two and twisted_kafka's ``__connection_events``.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__connection_events"})


class OffsetReader:
    def __init__(self, client: Mapping[str, str], *, timeout: float = 60.0):
        self._admin = AdminClient(dict(client))
        self._timeout = timeout
        self._isolation = (IsolationLevel.READ_COMMITTED
                           if client.get("isolation.level", "").lower() == "read_committed"
                           else IsolationLevel.READ_UNCOMMITTED)

    def partitions(self, subscription: Subscription) -> list[tuple[str, int]]:
        """The partitions that exist now and that the query reads, sorted."""
        metadata = self._admin.list_topics(timeout=self._timeout)
        found = []
        for name, topic in metadata.topics.items():
            if topic.error is not None:
                continue
            if subscription.kind == "subscribePattern" and name in INTERNAL_TOPICS:
                continue
            if not subscription.matches(name):
                continue
            for partition in topic.partitions:
                if subscription.kind != "assign" or (name, partition) in subscription.assigned:
                    found.append((name, partition))
        return sorted(found)

    def earliest(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self._list(partitions, OffsetSpec.earliest())

    def latest(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self._list(partitions, OffsetSpec.latest())

    def _list(self, partitions, spec) -> dict[tuple[str, int], int]:
        wanted = {TopicPartition(topic, partition): spec for topic, partition in partitions}
        if not wanted:
            return {}
        futures = self._admin.list_offsets(wanted, isolation_level=self._isolation,
                                           request_timeout=self._timeout)
        out = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                raise RuntimeError(f"ListOffsets of {tp.topic}-{tp.partition} failed: {exc}") from None
        return out
