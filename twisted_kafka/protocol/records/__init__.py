"""RecordBatch v2: parse, validate, patch, iterate and build record batches (sans-IO).

The broker stores batches exactly as clients send them (magic v2): the hot
path is a header parse plus one CRC-32C pass per batch, and the only bytes
it ever changes outside the CRC are baseOffset and partitionLeaderEpoch.

* ``batch``       header layout, walking a records blob, CRC, in-place patches
* ``record``      record decoding (``iter_records``) and framing walk
* ``compression`` the four codecs, both snappy framings, bounded output
* ``validation``  ``validate_records``: a Produce partition, checked as Kafka does
* ``builder``     ``build_batch`` for tests and the broker's internal topics
* ``control``     transaction markers (COMMIT/ABORT control batches): build and parse
"""

from .batch import (
                    BATCH_HEADER_SIZE,
                    LOG_OVERHEAD,
                    InvalidRecordBatch,
                    RecordBatchHeader,
                    iter_batch_headers,
                    parse_batch_header,
                    rewrite_offsets_and_epoch,
                    set_log_append_time,
                    validate_batch,
                    verify_crc,
)
from .builder import ControlRecordType, build_batch, control_record
from .compression import CompressionType, compress, decompress
from .control import EndTransactionMarker, build_end_txn_marker, parse_end_txn_marker
from .record import Record, iter_records
from .validation import validate_records

__all__ = [
    "BATCH_HEADER_SIZE", "LOG_OVERHEAD", "InvalidRecordBatch", "RecordBatchHeader",
    "iter_batch_headers", "parse_batch_header", "rewrite_offsets_and_epoch", "set_log_append_time",
    "validate_batch", "verify_crc", "ControlRecordType", "build_batch", "control_record",
    "CompressionType", "compress", "decompress", "EndTransactionMarker", "build_end_txn_marker",
    "parse_end_txn_marker", "Record", "iter_records", "validate_records",
]
