"""Live connections in least-recently-active order.

Two policies need that order: the idle reaper (``connections.max.idle.ms``)
closes connections from the old end, and a protected (inter-broker or
control-plane) listener evicts the least recently used connection of an
unprotected listener when it pushes the broker past ``max.connections``.  An ``OrderedDict`` moved-to-end on every
read and write keeps both O(1) per event.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .processor import Processor


class ConnectionRegistry:
    def __init__(self) -> None:
        self._lru: OrderedDict[str, Processor] = OrderedDict()

    def add(self, processor: Processor) -> None:
        self._lru[processor.connection_id] = processor

    def remove(self, processor: Processor) -> None:
        self._lru.pop(processor.connection_id, None)

    def get(self, connection_id: str) -> Processor | None:
        return self._lru.get(connection_id)

    def touch(self, processor: Processor) -> None:
        if processor.connection_id in self._lru:
            self._lru.move_to_end(processor.connection_id)

    def idle_before(self, cutoff: float) -> list[Processor]:
        """Connections whose last activity is older than ``cutoff`` and that wait on nothing."""
        idle = []
        for processor in self._lru.values():
            if processor.last_active >= cutoff:
                break
            if not processor.busy:
                idle.append(processor)
        return idle

    def least_recently_used(self, *, exclude_listeners: Collection[str]) -> Processor | None:
        """The least recently active open connection of a listener not in ``exclude_listeners``."""
        for processor in self._lru.values():
            if processor.listener_name not in exclude_listeners and not processor.closing:
                return processor
        return None

    def __len__(self) -> int:
        return len(self._lru)

    def __iter__(self) -> Iterator[Processor]:
        return iter(list(self._lru.values()))
