"""Producer id blocks of a ZooKeeper cluster: the ``/latest_producer_id_block`` znode.

Kafka's ``ZkProducerIdManager.getNewProducerIdBlock``: read the znode and
its version; the new block starts right after the one it holds (at 0 when
the znode is empty or missing); write it back only if the version is still
the one read.  When another broker claimed a block in between, the write
fails and the claim starts over from a fresh read, so two brokers never
share a block.  A claim acknowledged by ZooKeeper is durable there before
any of its ids is handed out.
"""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError
from twisted.internet.defer import Deferred, ensureDeferred

from twisted_kafka.zk.data import LATEST_PRODUCER_ID_BLOCK

from .producer_id_manager import LONG_MAX, PRODUCER_ID_BLOCK_SIZE, ProducerIdsBlock

#: Conditional updates lost to other brokers before giving up (the caller answers a retriable error).
MAX_ATTEMPTS = 50


class ZkProducerIdBlockStore:
    """The cluster ``ProducerIdBlockStore`` over a ``ZkClient`` (module docstring)."""

    def __init__(self, zk, path: str = LATEST_PRODUCER_ID_BLOCK):
        self.zk = zk
        self.path = path

    def allocate_block(self, broker_id: int) -> Deferred:
        return ensureDeferred(self._allocate(broker_id))

    async def _allocate(self, broker_id: int) -> ProducerIdsBlock:
        for _ in range(MAX_ATTEMPTS):
            data, stat = await self.zk.get_or_none(self.path)
            if data:
                latest = ProducerIdsBlock.from_json(data)   # ValueError: a damaged znode stops allocation
                first = latest.last_producer_id + 1
            else:
                first = 0
            if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
                raise ValueError("every producer id has been handed out")
            block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
            try:
                if stat is None:
                    await self.zk.create(self.path, block.to_json(), makepath=True)
                else:
                    await self.zk.set(self.path, block.to_json(), stat.version)
            except (BadVersionError, NodeExistsError):
                continue                                     # another broker claimed a block: read again
            return block
        raise RuntimeError(f"{self.path}: lost {MAX_ATTEMPTS} conditional updates in a row to other brokers")


__all__ = ["ZkProducerIdBlockStore"]
