"""A tool's failures on one line: the client's error, a file's, anything a tool prints before exiting.

Apart from ``admin`` (the clients) so that ``command``, which turns every tool's failure into its exit
status, reads it without importing the clients' module, which imports ``command``.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

__all__ = ["describe_exception", "describe_kafka_error"]


def describe_exception(exc: BaseException | KafkaError) -> str:
    """One line naming the cause of ``exc`` (a client's error, a file's, anything)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return describe_kafka_error(exc.args[0])
    if isinstance(exc, KafkaError):
        return describe_kafka_error(exc)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def describe_kafka_error(error: KafkaError) -> str:
    """``<message> (<ERROR_NAME>)``: the broker's own message where it sent one, and Kafka's error name."""
    name = error.name()
    message = " ".join(error.str().split())
    return message if name in message else f"{message} ({name})"
