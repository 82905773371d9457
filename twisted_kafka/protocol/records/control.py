"""Transaction markers: the control batches that end a transaction (KIP-98).

A transaction's outcome is written into each partition it touched as a
*control batch*: attributes bit 4 (transactional) and bit 5 (control) set,
the producer's id and epoch, base sequence -1, and exactly one *control
record* (Kafka's ``EndTransactionMarker`` and ``ControlRecordType``)::

    key   = version int16 (0)  type int16 (ABORT = 0, COMMIT = 1)
    value = version int16 (0)  coordinator_epoch int32

Only the broker writes them, on behalf of the transaction coordinator
(WriteTxnMarkers, ``AppendOrigin.COORDINATOR``): a client's control batch is
refused with INVALID_RECORD (``validation``).  Consumers skip control
batches; a read_committed consumer uses an ABORT marker to stop dropping the
aborted transaction's records.

Reading follows Kafka's leniency: a key or value version above 0 is read as
version 0 (later versions may only add fields), a negative version, a short
key or value, or a type other than ABORT/COMMIT is INVALID_RECORD.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import ErrorCode
from .batch import RecordBatchHeader
from .builder import ControlRecordType, build_batch, control_record
from .errors import InvalidRecordBatch
from .record import iter_records

__all__ = ["EndTransactionMarker", "build_end_txn_marker", "parse_end_txn_marker"]

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class EndTransactionMarker(NamedTuple):
    """What one transaction marker says (Kafka's ``EndTransactionMarker``)."""

    control_type: int           # ControlRecordType.ABORT or COMMIT
    coordinator_epoch: int
    timestamp: int = -1          # the control record's timestamp

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlRecordType.ABORT


def build_end_txn_marker(producer_id: int, producer_epoch: int, coordinator_epoch: int, control_type: int,
                         timestamp_ms: int, *, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """The control batch that ends producer ``producer_id``'s transaction (COMMIT or ABORT),
    as the broker appends it for WriteTxnMarkers (Kafka's ``MemoryRecords.withEndTransactionMarker``)."""
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"a transaction marker is ABORT or COMMIT, not control type {control_type}")
    if producer_id < 0:
        raise ValueError(f"a transaction marker needs a producer id, not {producer_id}")
    key, value = control_record(control_type, coordinator_epoch)
    return build_batch([(key, value, (), timestamp_ms)], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=-1, transactional=True, control=True,
                       partition_leader_epoch=partition_leader_epoch)


def _invalid(reason: str, position: int) -> InvalidRecordBatch:
    return InvalidRecordBatch(reason, ErrorCode.INVALID_RECORD, position=position)


def parse_end_txn_marker(buf, pos: int, header: RecordBatchHeader) -> EndTransactionMarker | None:
    """The marker in the control batch at ``buf[pos:]``; None for a control batch with no
    record (the log cleaner empties markers whose transaction is gone).  Raises
    ``InvalidRecordBatch`` (INVALID_RECORD) for anything but one well-formed marker."""
    if not header.is_control:
        raise _invalid("not a control batch", pos)
    if header.records_count == 0:
        return None
    records = list(iter_records(buf, pos, header))
    if len(records) != 1:
        raise _invalid(f"a transaction marker batch holds one control record, not {len(records)}", pos)
    record = records[0]
    key, value = record.key, record.value
    if key is None or len(key) < _KEY.size:
        raise _invalid(f"control record key of {0 if key is None else len(key)} bytes: at least 4 are needed", pos)
    key_version, control_type = _KEY.unpack_from(key)
    if key_version < 0:
        raise _invalid(f"invalid control record key version {key_version}", pos)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise _invalid(f"control record type {control_type} is not a transaction marker", pos)
    if value is None or len(value) < _VALUE.size:
        raise _invalid(f"transaction marker value of {0 if value is None else len(value)} bytes: at least "
                       f"{_VALUE.size} are needed", pos)
    value_version, coordinator_epoch = _VALUE.unpack_from(value)
    if value_version < 0:
        raise _invalid(f"invalid transaction marker version {value_version}", pos)
    return EndTransactionMarker(control_type, coordinator_epoch, record.timestamp)
