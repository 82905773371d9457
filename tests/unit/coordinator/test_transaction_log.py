"""``__transaction_state`` records in Kafka's format (TransactionLogKey v0, TransactionLogValue v0/v1),
and the transaction state machine (``TransactionMetadata``).

The expected bytes are written out by hand from Kafka's JSON schemas: a
version prefix (int16), then the fields in order -- v0 with int32 array
lengths and int16 string lengths, v1 flexible (varint lengths + 1, a
tagged-field section after each struct).
"""

from __future__ import annotations

import pytest

from twisted_kafka.coordinator.transaction.log_records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from twisted_kafka.coordinator.transaction.metadata import (
    TransactionMetadata,
    is_epoch_exhausted,
)
from twisted_kafka.coordinator.transaction.metadata import (
    TransactionState as S,
)
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.exceptions import ProtocolDecodeError

ONGOING = bytes.fromhex(
    "0000"                   # value version 0
    "00000000000003e8"       # producer_id 1000
    "0003"                   # producer_epoch 3
    "0000ea60"               # transaction_timeout_ms 60000
    "01"                     # transaction_status Ongoing
    "00000001"               # transaction_partitions: 1 topic
    "0001" "74"              #   topic "t"
    "00000002" "00000000" "00000002"   # partition_ids [0, 2]
    "0000000000000005"       # transaction_last_update_timestamp_ms
    "0000000000000004")      # transaction_start_timestamp_ms


def test_key_v0():
    assert encode_key("tx-1") == bytes.fromhex("0000" "0004" "74782d31")
    assert decode_key(bytes.fromhex("0000" "0004" "74782d31")) == "tx-1"
    assert decode_key(bytes.fromhex("0001" "0004" "74782d31")) is None      # a later key version: skipped


def test_value_v0_with_partitions():
    value = TransactionLogValue(1000, 3, 60000, S.ONGOING, {"t": [0, 2]}, 5, 4)
    assert encode_value(value) == ONGOING
    assert decode_value(ONGOING) == value


def test_value_v0_empty_has_null_partitions():
    empty = bytes.fromhex("0000" "0000000000000007" "0000" "00002710" "00" "ffffffff"
                          "0000000000000009" "ffffffffffffffff")
    value = TransactionLogValue(7, 0, 10000, S.EMPTY, None, 9, -1)
    assert encode_value(value) == empty and decode_value(empty) == value


def test_value_v1_flexible_with_tagged_fields():
    v1 = bytes.fromhex(
        "0001" "00000000000003e8" "0003" "0000ea60" "02"
        "02" "0274" "03" "00000000" "00000002" "00"        # compact: 1 topic "t", [0, 2], no tags
        "0000000000000005" "0000000000000004"
        "02" "00" "08" "00000000000003e7" "05" "02" "0001")  # tag 0 previous id 999, tag 5 unknown
    value = decode_value(v1)
    assert (value.producer_id, value.transaction_status, value.transaction_partitions,
            value.previous_producer_id, value.next_producer_id) == (1000, S.PREPARE_COMMIT, {"t": [0, 2]}, 999, -1)
    assert value.unknown_tags == {5: b"\x00\x01"}


@pytest.mark.parametrize("raw", [ONGOING[:-1], ONGOING + b"\x00", bytes.fromhex("0002") + ONGOING[2:]])
def test_malformed_values_are_refused(raw):
    with pytest.raises(ProtocolDecodeError):
        decode_value(raw)


# -- the state machine ---------------------------------------------------------------------------


def fresh() -> TransactionMetadata:
    return TransactionMetadata("tx", 5, -1, -1, -1, 60000, S.EMPTY)


def apply(txn, transit):
    txn.complete_transition(transit)
    return txn


def test_a_transaction_goes_through_its_states():
    txn = apply(fresh(), fresh().prepare_increment_epoch(60000, None, 1))
    assert (txn.state, txn.producer_epoch) == (S.EMPTY, 0)
    apply(txn, txn.prepare_add_partitions({("t", 0)}, 10))
    assert (txn.state, txn.partitions, txn.txn_start_timestamp) == (S.ONGOING, {("t", 0)}, 10)
    apply(txn, txn.prepare_add_partitions({("t", 1)}, 20))
    assert txn.partitions == {("t", 0), ("t", 1)} and txn.txn_start_timestamp == 10
    transit = txn.prepare_abort_or_commit(S.PREPARE_COMMIT, 30)
    assert transit.log_value().transaction_partitions == {"t": [0, 1]}
    apply(txn, transit)
    apply(txn, txn.prepare_complete(40))
    assert (txn.state, txn.partitions) == (S.COMPLETE_COMMIT, set())
    apply(txn, txn.prepare_add_partitions({("t", 2)}, 50))
    assert txn.txn_start_timestamp == 50


def test_a_pending_write_keeps_other_transitions_out_and_a_failed_one_changes_nothing():
    txn = apply(fresh(), fresh().prepare_increment_epoch(60000, None, 1))
    txn.prepare_add_partitions({("t", 0)}, 10)
    with pytest.raises(KafkaError) as raised:
        txn.prepare_add_partitions({("t", 1)}, 11)
    assert raised.value.code == ErrorCode.CONCURRENT_TRANSACTIONS
    txn.clear_pending()
    assert (txn.state, txn.partitions) == (S.EMPTY, set())


@pytest.mark.parametrize(("state", "target"), [(S.EMPTY, S.PREPARE_COMMIT), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
                                               (S.PREPARE_COMMIT, S.ONGOING), (S.ONGOING, S.COMPLETE_COMMIT)])
def test_invalid_transitions(state, target):
    txn = fresh()
    txn.state = state
    with pytest.raises(KafkaError) as raised:
        txn._transit(target, 1)
    assert raised.value.code == ErrorCode.INVALID_TXN_STATE and txn.pending_state is None


def test_fencing_bumps_the_epoch_in_memory_and_the_abort_keeps_the_partitions():
    txn = apply(fresh(), fresh().prepare_increment_epoch(60000, None, 1))
    apply(txn, txn.prepare_add_partitions({("t", 0)}, 10))
    txn.fence_producer_epoch()
    assert (txn.state, txn.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 1)
    transit = txn.prepare_abort_or_commit(S.PREPARE_ABORT, 20)
    assert (transit.producer_epoch, transit.partitions) == (1, frozenset({("t", 0)}))


def test_epoch_bumps_and_kip_360_retries():
    txn = apply(fresh(), fresh().prepare_increment_epoch(60000, None, 1))
    apply(txn, txn.prepare_increment_epoch(60000, 0, 2))
    assert (txn.producer_epoch, txn.last_producer_epoch) == (1, 0)
    retried = txn.prepare_increment_epoch(60000, 0, 3)          # the answer to the bump was lost
    assert retried.producer_epoch == 1
    txn.clear_pending()
    with pytest.raises(KafkaError) as raised:
        txn.prepare_increment_epoch(60000, 7, 4)
    assert raised.value.code == ErrorCode.PRODUCER_FENCED
    assert is_epoch_exhausted(32766) and not is_epoch_exhausted(32765)
    rotated = txn.prepare_producer_id_rotation(6, 60000, 5, record_last_epoch=False)
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_id) == (6, 0, 5)
