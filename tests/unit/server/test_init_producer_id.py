"""InitProducerId (22) and idempotent Produce through the handlers; producer id blocks on disk."""

from __future__ import annotations

import json
import os

import pytest
from twisted.internet.defer import Deferred, fail, maybeDeferred, succeed

from support.inline import SyncThreadPool
from twisted_kafka.coordinator.transaction import (
    PRODUCER_ID_BLOCK_FILE,
    FileProducerIdBlockStore,
    ProducerIdManager,
    ProducerIdsBlock,
)
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey

from .helpers import records, result_of
from .test_produce import produce

INIT = m.InitProducerIdRequest


def init(node, version: int, *, transactional_id=None, producer_id=-1, producer_epoch=-1):
    kwargs = {"producer_id": producer_id, "producer_epoch": producer_epoch} if version >= 3 else {}
    return node.call(INIT(transactional_id=transactional_id, transaction_timeout_ms=60000, **kwargs), version)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_each_version_gets_a_new_producer_id_at_epoch_0(node, version):
    first, second = init(node, version), init(node, version)
    assert (first.error_code, first.producer_epoch, second.error_code, second.producer_epoch) == (0, 0, 0, 0)
    assert second.producer_id == first.producer_id + 1


def test_a_producer_asking_to_start_over_gets_a_new_id(node):
    """KIP-360 without a transactional id: Kafka answers a fresh producer id at epoch 0."""
    first = init(node, 4)
    again = init(node, 4, producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert (again.error_code, again.producer_epoch) == (ErrorCode.NONE, 0)
    assert again.producer_id > first.producer_id


@pytest.mark.parametrize(("producer_id", "producer_epoch"), [(5, -1), (-1, 3)])
def test_an_id_without_an_epoch_is_an_invalid_request(node, producer_id, producer_epoch):
    body = init(node, 3, producer_id=producer_id, producer_epoch=producer_epoch)
    assert (body.error_code, body.producer_id, body.producer_epoch) == (ErrorCode.INVALID_REQUEST, -1, -1)


def test_ids_come_from_a_block_recorded_in_the_log_dir_before_use(node):
    producer_id = init(node, 4).producer_id
    with open(os.path.join(node.log_dir, PRODUCER_ID_BLOCK_FILE), "rb") as f:
        recorded = json.loads(f.read())
    assert recorded == {"version": 1, "broker": 0, "block_start": "0", "block_end": "999"}
    assert producer_id == 0


def test_a_damaged_block_file_stops_allocation_with_a_retriable_error(node):
    with open(os.path.join(node.log_dir, PRODUCER_ID_BLOCK_FILE), "wb") as f:
        f.write(b"{not json")
    body = init(node, 4)
    assert (body.error_code, body.producer_id) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1)


# -- the manager and the file store -------------------------------------------------------


def _manager(*dirs):
    return ProducerIdManager(1, FileProducerIdBlockStore([str(d) for d in dirs], blocking=maybeDeferred))


def test_ids_never_repeat_across_restarts(tmp_path):
    manager = _manager(tmp_path)
    used = [result_of(manager.generate_producer_id()) for _ in range(5)]
    assert used == [0, 1, 2, 3, 4]
    restarted = _manager(tmp_path)                    # the rest of block 0-999 is never handed out
    assert result_of(restarted.generate_producer_id()) == 1000


def test_the_next_block_is_fetched_at_ninety_percent(tmp_path):
    manager = _manager(tmp_path)
    ids = [result_of(manager.generate_producer_id()) for _ in range(901)]
    assert ids == list(range(901))
    with open(tmp_path / PRODUCER_ID_BLOCK_FILE, "rb") as f:
        assert ProducerIdsBlock.from_json(f.read()).first_producer_id == 1000
    more = [result_of(manager.generate_producer_id()) for _ in range(200)]
    assert more == list(range(901, 1000)) + list(range(1000, 1101))


def test_callers_wait_for_a_block_still_being_written(tmp_path):
    pending: list[Deferred] = []

    class SlowStore:
        def allocate_block(self, broker_id):
            pending.append(Deferred())
            return pending[-1]

    manager = ProducerIdManager(1, SlowStore())
    first, second = manager.generate_producer_id(), manager.generate_producer_id()
    assert not first.called and len(pending) == 1          # one allocation for both
    pending[0].callback(ProducerIdsBlock(1, 3000, 1000))
    assert (result_of(first), result_of(second)) == (3000, 3001)


def test_a_failed_allocation_fails_the_waiters_and_the_next_call_retries(tmp_path):
    attempts: list[int] = []

    class FlakyStore:
        def allocate_block(self, broker_id):
            attempts.append(broker_id)
            if len(attempts) == 1:
                return fail(OSError(28, "No space left on device"))
            d: Deferred = Deferred()
            d.callback(ProducerIdsBlock(broker_id, 0, 1000))
            return d

    manager = ProducerIdManager(1, FlakyStore())
    with pytest.raises(KafkaError) as e:
        result_of(manager.generate_producer_id())
    assert e.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and "No space left" in e.value.message
    assert result_of(manager.generate_producer_id()) == 0


def test_the_highest_block_of_every_log_dir_wins(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / PRODUCER_ID_BLOCK_FILE).write_bytes(ProducerIdsBlock(0, 5000, 1000).to_json())
    manager = _manager(a, b)
    assert result_of(manager.generate_producer_id()) == 6000
    for d in (a, b):                                   # recorded everywhere
        assert ProducerIdsBlock.from_json((d / PRODUCER_ID_BLOCK_FILE).read_bytes()).first_producer_id == 6000


def test_the_file_store_works_in_the_io_pool(tmp_path):
    store = FileProducerIdBlockStore([str(tmp_path)], reactor=_Reactor(), threadpool=SyncThreadPool())
    assert result_of(store.allocate_block(3)) == ProducerIdsBlock(3, 0, 1000)


class _Reactor:
    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


# -- idempotent Produce --------------------------------------------------------------------


def _idem(seq: int, *values: bytes, pid: int, epoch: int = 0) -> bytes:
    return records(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def _answer(body):
    [(p)] = [p for t in body.responses for p in t.partition_responses]
    return p


def test_idempotent_produce_answers_duplicates_with_the_original_offset(node):
    node.create_topic("t")
    node.produce("t", 0, b"before")
    pid = init(node, 4).producer_id
    first = _answer(node.call(produce({"t": {0: _idem(0, b"a", b"b", pid=pid)}}, acks=-1), 9))
    retry = _answer(node.call(produce({"t": {0: _idem(0, b"a", b"b", pid=pid)}}, acks=-1), 9))
    assert (first.error_code, first.base_offset) == (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 1)
    assert node.log("t").log_end_offset == 3


def test_idempotent_produce_errors_per_partition_with_kafkas_codes(node):
    node.create_topic("t", 2)
    pid = init(node, 4).producer_id
    node.call(produce({"t": {0: _idem(0, b"a", pid=pid, epoch=1), 1: _idem(0, b"a", pid=pid)}}, acks=-1), 9)
    body = node.call(produce({"t": {0: _idem(5, b"gap", pid=pid, epoch=1),
                                    1: _idem(1, b"ok", pid=pid)}}, acks=-1), 7)
    answers = {p.index: p for t in body.responses for p in t.partition_responses}
    assert (answers[0].error_code, answers[0].base_offset, answers[0].log_start_offset) == \
        (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1, 0)
    assert (answers[1].error_code, answers[1].base_offset) == (ErrorCode.NONE, 1)
    stale = _answer(node.call(produce({"t": {0: _idem(1, b"old", pid=pid, epoch=0)}}, acks=-1), 9))
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "smaller than the last seen epoch 1" in stale.error_message


# -- what is advertised ------------------------------------------------------------------------

TRANSACTION_APIS = {ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3), ApiKey.ADD_OFFSETS_TO_TXN: (0, 3), ApiKey.END_TXN: (0, 3),
                    ApiKey.WRITE_TXN_MARKERS: (1, 1), ApiKey.TXN_OFFSET_COMMIT: (0, 3)}


def test_init_producer_id_and_the_transaction_apis_are_advertised_at_the_versions_served(node):
    body = node.call(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised[ApiKey.INIT_PRODUCER_ID] == (0, 4)
    assert {key: advertised.get(key) for key in TRANSACTION_APIS} == TRANSACTION_APIS


# -- the ZooKeeper block store -----------------------------------------------------------------


class _Stat:
    def __init__(self, version: int):
        self.version = version


class FakeZk:
    """The three ``ZkClient`` operations the store uses, over one znode; ``interfere`` runs between
    the store's read and its write (another broker's claim)."""

    def __init__(self, data: bytes | None = b""):
        self.data, self.version = data, 0
        self.interfere = None

    def get_or_none(self, path):
        result = (None, None) if self.data is None else (self.data, _Stat(self.version))
        if self.interfere is not None:
            interfere, self.interfere = self.interfere, None
            interfere()
        return succeed(result)

    def set(self, path, value, version=-1):
        from kazoo.exceptions import BadVersionError
        if self.data is None:
            return fail(Exception("no node"))
        if version not in (-1, self.version):
            return fail(BadVersionError())
        self.data, self.version = value, self.version + 1
        return succeed(_Stat(self.version))

    def create(self, path, value=b"", makepath=False):
        from kazoo.exceptions import NodeExistsError
        if self.data is not None:
            return fail(NodeExistsError())
        self.data, self.version = value, 0
        return succeed(path)


def test_zookeeper_blocks_follow_the_znode_and_lose_no_race():
    from twisted_kafka.coordinator.transaction.zk_producer_id_store import ZkProducerIdBlockStore
    zk = FakeZk(b"")                                   # as created among the persistent paths
    store = ZkProducerIdBlockStore(zk)
    first = result_of(store.allocate_block(1))
    assert (first.first_producer_id, first.size) == (0, 1000)
    assert json.loads(zk.data) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    # Broker 2 claims a block between broker 1's read and write: broker 1 reads again.
    zk.interfere = lambda: result_of(ZkProducerIdBlockStore(zk).allocate_block(2))
    second = result_of(store.allocate_block(1))
    assert second.first_producer_id == 2000
    assert ProducerIdsBlock.from_json(zk.data) == second
    missing = FakeZk(None)
    assert result_of(ZkProducerIdBlockStore(missing).allocate_block(3)).first_producer_id == 0
    assert missing.data is not None
