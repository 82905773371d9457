"""Producer ids for InitProducerId: never handed out twice, across restarts too.

Kafka allocates producer ids in blocks of 1000 (``ProducerIdsBlock``): with
ZooKeeper each broker claims the next block by a conditional update of the
``/latest_producer_id_block`` znode (``ZkProducerIdManager``), holding
``{"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}``;
with KRaft it asks the controller (AllocateProducerIds), and fetches the
next block once 90% of the current one is used (``RPCProducerIdManager``).
A block is durable before any id of it is handed out, and ids of a block a
broker did not use up are never handed out again: a restart simply moves on
to a new block.

Here the same split:

* ``ProducerIdBlockStore`` -- where blocks come from.  Its one operation,
  ``allocate_block(broker_id)``, fires with a block disjoint from every
  block it ever returned (to any broker, before any restart), made durable
  first.  A ZooKeeper-backed cluster implements it over
  ``/latest_producer_id_block`` exactly as Kafka does;
* ``FileProducerIdBlockStore`` -- the single-node store: the znode's JSON in
  a ``producer-id-block`` file in the log dirs (written to every log dir,
  read from all of them, the highest block wins, so reordering or dropping
  a log dir does not bring old ids back), replaced atomically and fsynced
  in the I/O pool.  A file that cannot be read stops allocation (ids could
  repeat otherwise): InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS,
  and the error names the file, until an operator repairs or removes it;
* ``ProducerIdManager`` -- hands out the ids of the current block (at once,
  on the reactor), asks for the next block at 90% and, when a block is used
  up before the next one arrived, keeps the callers waiting for it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from twisted.internet import threads
from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.log.checkpoints import write_atomically
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

log = Logger()

#: Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``.
PRODUCER_ID_BLOCK_SIZE = 1000
#: Fraction of a block handed out before the next block is asked for (Kafka's ``PidPrefetchThreshold``).
PREFETCH_THRESHOLD = 0.90
#: The single-node store's file, in every log dir.
PRODUCER_ID_BLOCK_FILE = "producer-id-block"
LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    """``size`` producer ids from ``first_producer_id``, claimed by broker ``assigned_broker_id``."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    def to_json(self) -> bytes:
        """The ``/latest_producer_id_block`` znode's content (Kafka's ``ProducerIdBlockZNode``)."""
        return json.dumps({"version": 1, "broker": self.assigned_broker_id,
                           "block_start": str(self.first_producer_id),
                           "block_end": str(self.last_producer_id)}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdsBlock:
        """Parse the znode's content; ``ValueError`` when it is not a block."""
        try:
            js = json.loads(data)
            first, last = int(js["block_start"]), int(js["block_end"])
            block = cls(int(js["broker"]), first, last - first + 1)
        except (ValueError, TypeError, KeyError) as e:
            raise ValueError(f"not a producer id block: {data[:200]!r} ({e})") from None
        if first < 0 or last < first:
            raise ValueError(f"not a producer id block: [{first}, {last}]")
        return block


class ProducerIdBlockStore(Protocol):
    """Where producer id blocks come from (see the module docstring)."""

    def allocate_block(self, broker_id: int) -> Deferred:
        """Fires with a new, durable ``ProducerIdsBlock``, disjoint from every block ever
        allocated; fails if none can be (the caller answers a retriable error)."""


class FileProducerIdBlockStore:
    """The single-node ``ProducerIdBlockStore``: a file in the log dirs (module docstring)."""

    def __init__(self, log_dirs: Sequence[str], *, reactor=None, threadpool=None,
                 blocking: Callable[..., Deferred] | None = None):
        """``blocking(f, *args)`` runs ``f`` in the I/O pool (default: ``threadpool`` of ``reactor``)."""
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.paths = [os.path.join(d, PRODUCER_ID_BLOCK_FILE) for d in log_dirs]
        if blocking is None:
            if reactor is None:
                from twisted.internet import reactor
            blocking = partial(threads.deferToThreadPool, reactor,
                               threadpool if threadpool is not None else reactor.getThreadPool())
        self._blocking = blocking
        self._lock = threading.Lock()

    def allocate_block(self, broker_id: int) -> Deferred:
        return self._blocking(self.allocate_now, broker_id)

    def latest_block(self) -> ProducerIdsBlock | None:
        """The highest block any log dir records (BLOCKING); ``ValueError`` for a damaged file."""
        latest = None
        for path in self.paths:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            try:
                block = ProducerIdsBlock.from_json(data)
            except ValueError as e:
                raise ValueError(f"{path}: {e}; producer ids are not handed out until it is repaired "
                                 f"(or removed, if no producer id was ever handed out)") from None
            if latest is None or block.last_producer_id > latest.last_producer_id:
                latest = block
        return latest

    def allocate_now(self, broker_id: int) -> ProducerIdsBlock:
        """Claim the block after the highest one recorded, durably (BLOCKING)."""
        with self._lock:
            latest = self.latest_block()
            first = 0 if latest is None else latest.last_producer_id + 1
            if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
                raise ValueError("every producer id has been handed out")
            block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
            data = block.to_json()
            errors = []
            for path in self.paths:
                try:
                    write_atomically(path, data, fsync=True)
                except OSError as e:
                    errors.append(f"{path}: {e.strerror or e}")
            if len(errors) == len(self.paths):
                raise OSError(f"cannot record producer id block {first}-{block.last_producer_id}: "
                              f"{'; '.join(errors)}")
            for error in errors:
                log.warn("cannot record producer id block {first}-{last} in {error}; the other log dirs "
                         "have it", first=first, last=block.last_producer_id, error=error)
            return block


class ProducerIdManager:
    """Hands out producer ids from blocks of a ``ProducerIdBlockStore`` (module docstring)."""

    def __init__(self, broker_id: int, store: ProducerIdBlockStore):
        self.broker_id = broker_id
        self.block_store = store
        self._block: ProducerIdsBlock | None = None
        self._next_id = 0
        self._next_block: ProducerIdsBlock | None = None
        self._allocating: Deferred | None = None
        self._waiters: list[Deferred] = []

    @property
    def current_block(self) -> ProducerIdsBlock | None:
        return self._block

    def _claim(self) -> int | None:
        block = self._block
        if block is None or self._next_id > block.last_producer_id:
            if self._next_block is None:
                return None
            block = self._block = self._next_block
            self._next_block = None
            self._next_id = block.first_producer_id
        producer_id = self._next_id
        self._next_id += 1
        if producer_id == block.first_producer_id + int(block.size * PREFETCH_THRESHOLD):
            self._request_block()
        return producer_id

    def generate_producer_id(self) -> Deferred:
        """Fires with a producer id never handed out before -- at once while the current
        block lasts.  Fails with ``KafkaError(COORDINATOR_LOAD_IN_PROGRESS)``, which
        clients retry, when no block can be allocated."""
        producer_id = self._claim()
        if producer_id is not None:
            return succeed(producer_id)
        d: Deferred[int] = Deferred()
        self._waiters.append(d)
        self._request_block()
        return d

    def _request_block(self) -> None:
        if self._allocating is not None or self._next_block is not None:
            return
        d = self._allocating = self.block_store.allocate_block(self.broker_id)
        d.addCallbacks(self._allocated, self._allocation_failed)

    def _allocated(self, block: ProducerIdsBlock) -> None:
        self._allocating = None
        current = self._block
        if current is not None and block.first_producer_id <= current.last_producer_id:
            self._allocation_failed(Failure(ValueError(
                f"the store returned block {block.first_producer_id}-{block.last_producer_id}, which is not "
                f"after the current block {current.first_producer_id}-{current.last_producer_id}")))
            return
        log.info("Producer id block {first}-{last} allocated for broker {broker}", first=block.first_producer_id,
                 last=block.last_producer_id, broker=self.broker_id)
        self._next_block = block
        waiters, self._waiters = self._waiters, []
        for i, waiter in enumerate(waiters):
            producer_id = self._claim()
            if producer_id is None:          # more waiters than ids: the rest wait for the next block
                self._waiters = waiters[i:] + self._waiters
                self._request_block()
                return
            waiter.callback(producer_id)

    def _allocation_failed(self, failure: Failure) -> None:
        self._allocating = None
        log.error("Cannot allocate a producer id block: {error}", error=failure.getErrorMessage())
        waiters, self._waiters = self._waiters, []
        error = KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           f"no producer id block could be allocated: {failure.getErrorMessage()}")
        for waiter in waiters:
            waiter.errback(Failure(error))


__all__ = ["PRODUCER_ID_BLOCK_FILE", "PRODUCER_ID_BLOCK_SIZE", "FileProducerIdBlockStore", "ProducerIdBlockStore",
           "ProducerIdManager", "ProducerIdsBlock"]
