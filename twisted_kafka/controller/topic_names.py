"""Kafka's rules for topic names (``org.apache.kafka.common.internals.Topic``)."""

from __future__ import annotations

import re

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
#: Kafka's two, and this broker's record of its connections (server/connection_event_log.py).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__connection_events"})


def validate_topic_name(name: str | None) -> None:
    """Raise INVALID_TOPIC_EXCEPTION with Kafka's reason when ``name`` is not a legal topic name."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                         f"topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them."""
    return name.replace(".", "_")
