"""Kafka's printed forms, where runbooks and scripts read them.

Java's ``printf("%-15s", ...)`` pads exactly as Python's ``%`` operator does,
so the tools' tables are written with the same format strings as Kafka's
(``%n`` is a newline).  JSON is printed compact, as Kafka's ``Json`` and
Jackson write it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["topic_partition", "compact_json", "kafka_uuid", "MISSING"]

#: Kafka's ConsumerGroupCommand.MISSING_COLUMN_VALUE.
MISSING = "-"


def topic_partition(topic: str, partition: int) -> str:
    """Java's ``TopicPartition.toString()``."""
    return f"{topic}-{partition}"


def kafka_uuid(uuid: Any) -> str:
    """Java's ``Uuid.toString()``: URL-safe base64 without padding (confluent-kafka prints the standard
    alphabet, with ``+`` and ``/``)."""
    return str(uuid).replace("+", "-").replace("/", "_")


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
