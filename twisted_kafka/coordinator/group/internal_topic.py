"""Creating a coordinator's internal topic on first use (``__consumer_offsets``, ``__transaction_state``).

Kafka creates a coordinator's topic when a client first asks for a
coordinator (FindCoordinator), not at startup: a broker that never sees a
consumer group or a transactional producer never holds their 50 logs.  Many
clients may ask at once, so the callers share one creation; a failure is
logged and answered COORDINATOR_NOT_AVAILABLE, which every client retries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

log = Logger(namespace="twisted_kafka.coordinator.InternalTopic")


class InternalTopic:
    def __init__(self, name: str, *, spec: Callable[[], NewTopic], exists: Callable[[], bool], admin_manager,
                 timeout_ms: int):
        """``spec()``: the topic as it is created now (its replication factor capped at the brokers
        alive); ``exists()``: whether this broker's metadata has it."""
        self.name = name
        self.spec = spec
        self.exists = exists
        self.admin_manager = admin_manager
        self.timeout_ms = timeout_ms
        self._creating: Deferred | None = None

    async def ensure(self) -> ErrorCode:
        """Create the topic unless it exists; NONE once it does (concurrent callers share one creation)."""
        if self.exists():
            return ErrorCode.NONE
        creating = self._creating
        if creating is None:
            creating = self._creating = Deferred()
            ensureDeferred(self._create()).addBoth(self._created, creating)
        d: Deferred = Deferred()
        creating.addBoth(_pass_on, d)
        return await d

    def _created(self, result: Any, creating: Deferred) -> None:
        if self._creating is creating:
            self._creating = None
        creating.callback(result)

    async def _create(self) -> ErrorCode:
        topic = self.spec()
        try:
            (result,) = await self.admin_manager.create_topics([topic], timeout_ms=self.timeout_ms)
        except KafkaError as exc:
            log.warn("Cannot create {topic}: {error}", topic=self.name, error=exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        except Exception:
            log.failure("Creating {topic} failed", topic=self.name)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warn("Cannot create {topic}: {error} {message}", topic=self.name, error=result.error.name,
                     message=result.message or "")
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        log.info("Created {topic} with {n} partition(s), replication factor {factor}", topic=self.name,
                 n=topic.num_partitions, factor=topic.replication_factor)
        return ErrorCode.NONE if self.exists() else ErrorCode.COORDINATOR_NOT_AVAILABLE


def _pass_on(result: Any, d: Deferred) -> Any:
    d.callback(result)
    return result
