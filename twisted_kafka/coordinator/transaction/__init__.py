"""The transaction coordinator (KIP-98) and the producer ids of idempotent and transactional producers.

* ``producer_id_manager`` -- ``ProducerIdManager`` hands out producer ids
  (InitProducerId) from blocks that a ``ProducerIdBlockStore`` allocates
  durably, so an id is never handed out twice, across restarts too.  The
  single-node store is a small file in the first log dir
  (``FileProducerIdBlockStore``); a ZooKeeper cluster backs the same
  interface with Kafka's ``/latest_producer_id_block`` znode.
* ``log_records`` -- the key and value schemas of ``__transaction_state``.
* ``metadata`` -- one transactional id's state machine.
* ``coordinator`` -- ``TransactionCoordinator``: InitProducerId,
  AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, timeouts, expiration, the
  loading of its partitions.
* ``markers`` / ``marker_writer`` -- the markers sent to partition leaders
  (WriteTxnMarkers) and written by them.
* ``service`` -- ``TransactionCoordinatorService``, the broker service.
"""

from .producer_id_manager import (
    PRODUCER_ID_BLOCK_FILE,
    PRODUCER_ID_BLOCK_SIZE,
    FileProducerIdBlockStore,
    ProducerIdBlockStore,
    ProducerIdManager,
    ProducerIdsBlock,
)

__all__ = ["PRODUCER_ID_BLOCK_FILE", "PRODUCER_ID_BLOCK_SIZE", "FileProducerIdBlockStore", "ProducerIdBlockStore",
           "ProducerIdManager", "ProducerIdsBlock"]
