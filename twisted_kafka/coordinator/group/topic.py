"""``__consumer_offsets``: its name, which partition holds a group, and how it is created.

A group lives in partition ``abs(hashCode(group_id)) % offsets.topic.num.partitions``
of the offsets topic -- Java's ``String.hashCode`` over UTF-16 code units and
Kafka's ``Utils.abs`` (which maps Integer.MIN_VALUE to 0) -- so every broker,
and Kafka itself, puts a group in the same partition, and the broker leading
that partition is the group's coordinator.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"

_INT_MIN = -(2 ** 31)


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as an int32."""
    h = 0
    data = value.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: the absolute value, with Integer.MIN_VALUE mapped to 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id``."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """The offsets topic's configs, as Kafka creates it: compacted (only the latest commit
    of each key matters) and with its own segment size.  Kafka also sets the topic's
    compression to "producer", which is the default here: batches are stored as written."""
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
