"""Options of the ``twisted_kafka`` Spark data source, parsed and checked once.

The names and meanings are those of Spark's Kafka source and sink
(Structured Streaming + Kafka Integration Guide):

* exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern``
  (a regular expression matched against whole topic names) or ``assign``
  (JSON ``{"topic": [0, 1]}``);
* ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON
  ``{"topic": {"0": 23, "1": -2}}`` where -2 means earliest and -1 latest;
  a batch query starts at ``earliest`` and ends at ``latest`` by default, a
  streaming query starts at ``latest`` and has no end;
* ``failOnDataLoss`` (default true), ``includeHeaders`` (default false),
  ``maxOffsetsPerTrigger``, ``minPartitions``,
  ``kafkaConsumer.pollTimeoutMs`` (how long an executor waits for records it
  was told exist, default 120000);
* ``kafka.<name>``: passed to the librdkafka client as ``<name>``
  (``kafka.bootstrap.servers`` is required);
* ``kafka.isolation.level``: ``read_uncommitted`` (the default, as Spark's
  Kafka source, whose Java consumer defaults to it) or ``read_committed``
  (only committed transactions' records; ranges end at the last stable
  offset). librdkafka's own default would be read_committed, so the source
  sets it;
* sink: ``topic`` (overrides a ``topic`` column); ``kafka.transactional.id``
  is refused (the sink does not run transactions).

Spark passes option names case-insensitively; the values keep their case.
Options of Spark's Kafka source this data source does not implement are
refused with an error rather than ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .offsets import EARLIEST, EARLIEST_OFFSET, LATEST, LATEST_OFFSET

__all__ = ["OptionError", "Subscription", "SourceOptions", "SinkOptions", "parse_source_options",
           "parse_sink_options"]

#: Spark's Kafka options that this data source does not implement (refused).
_UNSUPPORTED = ("startingoffsetsbytimestamp", "startingtimestamp", "endingoffsetsbytimestamp", "endingtimestamp",
                "startingoffsetsbytimestampstrategy", "minoffsetspertrigger", "maxtriggerdelay",
                "maxrecordsperpartition", "groupidprefix", "fetchoffset.numretries",
                "fetchoffset.retryintervalms", "kafka.group.id")

#: librdkafka settings the data source owns: offsets come from the query, never from a group.
_RESERVED_CLIENT_KEYS = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "the data source never commits offsets to Kafka (it keeps them in Spark's checkpoint)",
    "enable.auto.offset.store": "the data source never commits offsets to Kafka",
    "key.deserializer": "keys are always read as bytes (cast the 'key' column)",
    "value.deserializer": "values are always read as bytes (cast the 'value' column)",
    "key.serializer": "write a binary or string 'key' column",
    "value.serializer": "write a binary or string 'value' column",
}

DEFAULT_POLL_TIMEOUT_MS = 120_000


class OptionError(ValueError):
    """An option of the data source is missing, malformed or not supported."""


@dataclass(frozen=True)
class Subscription:
    """Which topic partitions a query reads: ``kind`` is subscribe, subscribePattern or assign."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={json.dumps(_assigned_json(self.assigned))}"


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]
    subscription: Subscription
    #: ``EARLIEST``, ``LATEST`` or {(topic, partition): offset}, offsets possibly -2/-1.
    starting: object
    ending: object
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None = None


def _client_options(options: Mapping[str, str]) -> dict[str, str]:
    client = {}
    for key, value in options.items():
        lowered = key.lower()
        if not lowered.startswith("kafka."):
            continue
        name = lowered[len("kafka."):]
        if name in _RESERVED_CLIENT_KEYS:
            raise OptionError(f"Kafka option '{name}' is not supported: {_RESERVED_CLIENT_KEYS[name]}")
        client[name] = str(value)
    if not client.get("bootstrap.servers"):
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified (the brokers to connect to)")
    return client


def _get(options: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    lowered = str(value).strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise OptionError(f"Option '{name}' must be true or false, not {value!r}")


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise OptionError(f"Option '{name}' must be a positive integer, not {value!r}") from None
    if number <= 0:
        raise OptionError(f"Option '{name}' must be a positive integer, not {value!r}")
    return number


def _assigned_json(assigned) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in assigned:
        out.setdefault(topic, []).append(partition)
    return out


def _subscription(options: Mapping[str, str]) -> Subscription:
    given: dict[str, str] = {name: value for name in ("subscribe", "subscribePattern", "assign")
                             if (value := _get(options, name)) is not None}
    if len(given) != 1:
        raise OptionError("Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
                          f"specified (got {', '.join(sorted(given)) or 'none'})")
    (kind, value), = given.items()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"Option 'subscribe' must name at least one topic, not {value!r}")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        if not value.strip():
            raise OptionError("Option 'subscribePattern' must not be empty")
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"Option 'subscribePattern' is not a valid regular expression: {exc}") from None
        return Subscription(kind, pattern=value)
    try:
        parsed = json.loads(value)
        assigned = tuple(sorted({(str(t), int(p)) for t, parts in parsed.items() for p in parts}))
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f'Option \'assign\' must be JSON like {{"topicA": [0, 1]}}, not {value!r}') from None
    if not assigned:
        raise OptionError(f"Option 'assign' must name at least one partition, not {value!r}")
    return Subscription(kind, assigned=assigned)


def _offsets(options: Mapping[str, str], name: str, default):
    value = _get(options, name)
    if value is None:
        return default
    text = str(value).strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        parsed = json.loads(text)
        return {(str(topic), int(partition)): int(offset)
                for topic, parts in parsed.items() for partition, offset in parts.items()}
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f"Option '{name}' must be 'earliest', 'latest' or JSON like "
                          f'{{"topic": {{"0": 23, "1": -2}}}} (-2: earliest, -1: latest), not {value!r}') from None


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check the options of a read; ``streaming`` selects Spark's rules for streaming queries."""
    for name in _UNSUPPORTED:
        if _get(options, name) is not None:
            raise OptionError(f"Option '{name}' of Spark's Kafka source is not supported by twisted_kafka")
    client = _client_options(options)
    isolation = client.setdefault("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"Option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
                          f"not {client['isolation.level']!r}")
    client["isolation.level"] = isolation
    subscription = _subscription(options)
    starting = _offsets(options, "startingOffsets", LATEST if streaming else EARLIEST)
    ending = _offsets(options, "endingOffsets", None if streaming else LATEST)
    if streaming:
        if ending is not None:
            raise OptionError("Option 'endingOffsets' is not valid in streaming queries")
    else:
        if starting == LATEST:
            raise OptionError("Option 'startingOffsets' must not be 'latest' for a batch query")
        if isinstance(starting, dict) and LATEST_OFFSET in starting.values():
            raise OptionError("Option 'startingOffsets' must not use -1 (latest) for a batch query")
        if ending == EARLIEST:
            raise OptionError("Option 'endingOffsets' must not be 'earliest' for a batch query")
        if isinstance(ending, dict) and EARLIEST_OFFSET in ending.values():
            raise OptionError("Option 'endingOffsets' must not use -2 (earliest) for a batch query")
    for offsets in (starting, ending):
        if isinstance(offsets, dict) and subscription.kind != "subscribePattern":
            outside = sorted(tp for tp in offsets if not subscription.matches(tp[0]) or (
                subscription.kind == "assign" and tp not in subscription.assigned))
            if outside:
                raise OptionError(f"Specific offsets name partitions the query does not read: {_tps(outside)} "
                                  f"({subscription.describe()})")
        if isinstance(offsets, dict) and any(o < EARLIEST_OFFSET for o in offsets.values()):
            raise OptionError("Specific offsets must be >= 0, or -2 (earliest) / -1 (latest)")
    poll_timeout = _positive_int(options, "kafkaConsumer.pollTimeoutMs")
    return SourceOptions(
        client=client,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(options, "minPartitions"),
        poll_timeout_ms=poll_timeout or DEFAULT_POLL_TIMEOUT_MS,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    topic = _get(options, "topic")
    if topic is not None and not topic.strip():
        raise OptionError("Option 'topic' must not be empty")
    client = _client_options(options)
    if "transactional.id" in client:
        raise OptionError("Kafka option 'transactional.id' is not supported by the sink: it writes at-least-once, "
                          "as Spark's Kafka sink does, and does not run transactions (a librdkafka producer with a "
                          "transactional id refuses every record until init_transactions)")
    return SinkOptions(client=client, topic=topic.strip() if topic else None)


def _tps(tps) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)

