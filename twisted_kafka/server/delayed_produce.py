"""The produce purgatory: acks=all appends waiting for the ISR to have their records.

A Produce with acks=all is answered once every in-sync replica has the
records, i.e. once the partition's high watermark passes the append's last
offset (Kafka's ``DelayedProduce``).  If by then the ISR has fewer members
than ``min.insync.replicas`` the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND:
the records are written, but not as durably as asked.  If the request's
``timeout_ms`` passes first, the answer is REQUEST_TIMED_OUT; if the broker
stops leading the partition (even if it leads it again since: its log may
have been truncated meanwhile), NOT_LEADER_OR_FOLLOWER; a new leader epoch
with this broker still the leader (the controller took a failed follower out
of the ISR) keeps the wait.  Waits are completed
when the high watermark moves (a follower's fetch), when leadership changes,
and by a timer on the reactor's clock.
"""

from __future__ import annotations

from collections import defaultdict

from twisted.internet.defer import Deferred

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .partition import Partition


class DelayedProduce:
    __slots__ = ("partition", "generation", "required_offset", "result", "deferred", "timer")

    def __init__(self, partition: Partition, required_offset: int, result):
        self.partition = partition
        self.generation = partition.follower_generation
        self.required_offset = required_offset    # the high watermark that covers the append
        self.result = result                      # what the wait fires with (the LogAppendInfo)
        self.deferred: Deferred = Deferred()
        self.timer = None


class ProducePurgatory:
    def __init__(self, reactor):
        self.reactor = reactor
        self._waiting: dict[tuple[str, int], set[DelayedProduce]] = defaultdict(set)

    def wait(self, partition: Partition, required_offset: int, result, timeout_ms: int) -> Deferred:
        """Fires with ``result`` once the high watermark reaches ``required_offset``; fails with
        ``KafkaError`` (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        delayed = DelayedProduce(partition, required_offset, result)
        if self._try_complete(delayed):
            return delayed.deferred
        self._waiting[(partition.topic, partition.index)].add(delayed)
        delayed.timer = self.reactor.callLater(max(timeout_ms, 0) / 1000.0, self._expire, delayed)
        return delayed.deferred

    def check(self, topic: str, index: int) -> None:
        """The partition's high watermark, ISR or leadership changed: complete what can be."""
        waiting = self._waiting.get((topic, index))
        if not waiting:
            return
        for delayed in list(waiting):
            if self._try_complete(delayed):
                self._remove(delayed)

    def _try_complete(self, delayed: DelayedProduce) -> bool:
        partition = delayed.partition
        if not partition.is_leader or partition.follower_generation != delayed.generation or partition.log.deleted:
            self._fail(delayed, KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                           f"Leadership of {partition.topic}-{partition.index} changed before "
                                           f"the in-sync replicas had the records"))
            return True
        if partition.high_watermark < delayed.required_offset:
            return False
        min_isr = partition.log.config.min_insync_replicas
        if len(partition.isr) < min_isr:
            self._fail(delayed, KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                           f"The size of the current ISR {partition.isr} is insufficient to "
                                           f"satisfy the min.isr requirement of {min_isr} for partition "
                                           f"{partition.topic}-{partition.index}"))
            return True
        self._finish(delayed)
        delayed.deferred.callback(delayed.result)
        return True

    def _expire(self, delayed: DelayedProduce) -> None:
        delayed.timer = None
        self._remove(delayed)
        if self._try_complete(delayed):
            return
        partition = delayed.partition
        self._fail(delayed, KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                       f"The in-sync replicas of {partition.topic}-{partition.index} did not "
                                       f"have offset {delayed.required_offset - 1} within the request timeout"))

    def _fail(self, delayed: DelayedProduce, error: KafkaError) -> None:
        self._finish(delayed)
        delayed.deferred.errback(error)

    def _finish(self, delayed: DelayedProduce) -> None:
        if delayed.timer is not None and delayed.timer.active():
            delayed.timer.cancel()
        delayed.timer = None

    def _remove(self, delayed: DelayedProduce) -> None:
        key = (delayed.partition.topic, delayed.partition.index)
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.discard(delayed)
            if not waiting:
                del self._waiting[key]

    def complete_all(self) -> None:
        """Shutdown: every wait fails with NOT_LEADER_OR_FOLLOWER (the producer retries elsewhere)."""
        for waiting in list(self._waiting.values()):
            for delayed in list(waiting):
                self._remove(delayed)
                self._fail(delayed, KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "The broker is shutting down"))

    @property
    def size(self) -> int:
        return sum(len(w) for w in self._waiting.values())


__all__ = ["ProducePurgatory", "DelayedProduce"]
