"""The transaction coordinator's part that exists today: producer ids for idempotent producers.

* ``producer_id_manager`` -- ``ProducerIdManager`` hands out producer ids
  (InitProducerId) from blocks that a ``ProducerIdBlockStore`` allocates
  durably, so an id is never handed out twice, across restarts too.  The
  single-node store is a small file in the first log dir
  (``FileProducerIdBlockStore``); a ZooKeeper cluster backs the same
  interface with Kafka's ``/latest_producer_id_block`` znode.
* ``refusal`` -- ``TransactionRefusals``: transactions themselves (the
  coordinator, ``__transaction_state``, markers) are not built and their
  APIs are not advertised, so a transactional producer's FindCoordinator and
  InitProducerId are refused with a code every client stops on at once, and
  each refusal is logged (rate-limited).
"""

from .producer_id_manager import (
    PRODUCER_ID_BLOCK_FILE,
    PRODUCER_ID_BLOCK_SIZE,
    FileProducerIdBlockStore,
    ProducerIdBlockStore,
    ProducerIdManager,
    ProducerIdsBlock,
)
from .refusal import REFUSAL_ERROR, REFUSAL_MESSAGE, TransactionRefusals

__all__ = ["PRODUCER_ID_BLOCK_FILE", "PRODUCER_ID_BLOCK_SIZE", "FileProducerIdBlockStore", "ProducerIdBlockStore",
           "ProducerIdManager", "ProducerIdsBlock", "REFUSAL_ERROR", "REFUSAL_MESSAGE", "TransactionRefusals"]
