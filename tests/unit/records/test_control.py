"""Transaction markers: the control batch the broker writes, byte for byte, and what is refused when read."""

from __future__ import annotations

import struct

import pytest

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    InvalidRecordBatch,
    build_batch,
    build_end_txn_marker,
    iter_records,
    parse_batch_header,
    parse_end_txn_marker,
    validate_batch,
)

NOW = 1_700_000_000_000


def test_a_marker_is_a_transactional_control_batch_of_one_control_record():
    data = build_end_txn_marker(4711, 3, 17, ControlRecordType.COMMIT, NOW, base_offset=42, partition_leader_epoch=5)
    header = parse_batch_header(data)
    validate_batch(data, 0, header)
    # Attributes: bit 4 transactional, bit 5 control, no codec.
    assert header.attributes == 0x30
    assert (header.base_offset, header.partition_leader_epoch, header.records_count) == (42, 5, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4711, 3, -1)
    assert header.base_timestamp == header.max_timestamp == NOW
    (record,) = list(iter_records(data, 0, header))
    assert record.key == struct.pack(">hh", 0, 1)                 # version 0, COMMIT
    assert record.value == struct.pack(">hi", 0, 17)              # version 0, coordinator epoch
    assert parse_end_txn_marker(data, 0, header) == EndTransactionMarker(ControlRecordType.COMMIT, 17, NOW)


def test_abort_markers_read_as_aborts():
    data = build_end_txn_marker(1, 0, 0, ControlRecordType.ABORT, NOW)
    marker = parse_end_txn_marker(data, 0, parse_batch_header(data))
    assert marker.is_abort and marker.control_type == ControlRecordType.ABORT == 0


@pytest.mark.parametrize("kwargs", [{"control_type": 2}, {"producer_id": -1}])
def test_only_commit_and_abort_markers_of_a_producer_are_built(kwargs):
    args = {"producer_id": 1, "producer_epoch": 0, "coordinator_epoch": 0, "control_type": 1, "timestamp_ms": NOW}
    args.update(kwargs)
    with pytest.raises(ValueError):
        build_end_txn_marker(**args)


def _control(records):
    return build_batch(records, producer_id=1, producer_epoch=0, transactional=True, control=True)


@pytest.mark.parametrize("records", [
    [(struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 0), (), NOW)],        # LEADER_CHANGE: no marker
    [(struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 0), (), NOW)],       # negative key version
    [(struct.pack(">h", 0), struct.pack(">hi", 0, 0), (), NOW)],            # short key
    [(struct.pack(">hh", 0, 1), struct.pack(">h", 0), (), NOW)],            # short value
    [(struct.pack(">hh", 0, 1), struct.pack(">hi", -1, 0), (), NOW)],       # negative value version
    [(struct.pack(">hh", 0, 1), None, (), NOW)],                            # no value
    [(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0), (), NOW)] * 2,    # two records
])
def test_anything_but_one_well_formed_marker_is_invalid_record(records):
    data = _control(records)
    with pytest.raises(InvalidRecordBatch) as e:
        parse_end_txn_marker(data, 0, parse_batch_header(data))
    assert e.value.error_code == ErrorCode.INVALID_RECORD


def test_later_versions_are_read_as_version_0_and_a_data_batch_is_no_marker():
    data = _control([(struct.pack(">hhh", 1, 0, 9), struct.pack(">hiq", 3, 8, 0), (), NOW)])
    assert parse_end_txn_marker(data, 0, parse_batch_header(data)) == EndTransactionMarker(0, 8, NOW)
    plain = build_batch([(b"k", b"v", (), NOW)])
    with pytest.raises(InvalidRecordBatch):
        parse_end_txn_marker(plain, 0, parse_batch_header(plain))
