"""JsonFileMetadataStore on real files: the backup generation, falling back to it, and
rebuilding the topics from the partition directories when both files are lost."""

from __future__ import annotations

import os
import uuid

import pytest
from twisted.internet.defer import ensureDeferred

from support.inline import InlineReactor, SyncThreadPool
from twisted_kafka.config import StartupError
from twisted_kafka.controller.metadata_store import JsonFileMetadataStore, PartitionRecord, topic_record
from twisted_kafka.log.checkpoints import write_epoch_checkpoint, write_partition_metadata


def _run(coroutine):
    d = ensureDeferred(coroutine)
    results = []
    d.addBoth(results.append)
    assert results, "did not finish"
    result = results[0]
    if hasattr(result, "raiseException"):
        result.raiseException()
    return result


def _store(log_dir, *, broker_id=3, log_dirs=None) -> JsonFileMetadataStore:
    return JsonFileMetadataStore(str(log_dir), reactor=InlineReactor(), threadpool=SyncThreadPool(),
                                 log_dirs=log_dirs, broker_id=broker_id)


def _topic(name, partitions=1, epoch=0, topic_id=None):
    return topic_record(name, topic_id or uuid.uuid4(), {
        i: PartitionRecord((3,), 3, epoch, (3,)) for i in range(partitions)}, {"retention.ms": "1000"})


def _partition_dir(log_dir, name, topic_id=None, epochs=None, garbage_metadata=False):
    path = os.path.join(str(log_dir), name)
    os.makedirs(path)
    if garbage_metadata:
        with open(os.path.join(path, "partition.metadata"), "wb") as f:
            f.write(b"\xff\x00garbage")
    elif topic_id is not None:
        write_partition_metadata(os.path.join(path, "partition.metadata"), topic_id)
    if epochs is not None:
        write_epoch_checkpoint(os.path.join(path, "leader-epoch-checkpoint"), epochs)
    return path


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_every_write_keeps_the_version_it_replaces(tmp_path):
    store = _store(tmp_path)
    _run(store.load())
    _run(store.increment_controller_epoch())
    assert not os.path.exists(store.backup_path)             # nothing to keep yet
    first = _read(store.path)
    _run(store.create_topics([_topic("a")]))
    assert _read(store.backup_path) == first
    second = _read(store.path)
    _run(store.delete_topics(["a"]))
    assert _read(store.backup_path) == second
    assert os.stat(store.backup_path).st_nlink == 1          # the old link is gone with the rename
    assert sorted(os.listdir(tmp_path)) == ["cluster-metadata.json", "cluster-metadata.json.bak"]


@pytest.mark.parametrize("damage", [b"", b"{\"version\": 1, \"topics\": {", b"\x00\xff\xfe garbage",
                                    b"[1, 2, 3]", b"{\"version\": 1}"])
def test_a_damaged_file_falls_back_to_the_previous_version(tmp_path, damage):
    store = _store(tmp_path)
    _run(store.load())
    a = _topic("a", partitions=2, epoch=4)
    _run(store.create_topics([a]))
    _run(store.set_broker_configs("", {"log.retention.ms": "5"}))      # the last change
    with open(store.path, "wb") as f:
        f.write(damage)
    store = _store(tmp_path)
    state = _run(store.load())
    assert dict(state.topics) == {"a": a}
    assert dict(state.broker_configs) == {}                 # written after the backup: lost
    assert _read(store.path + ".damaged") == damage
    assert not os.path.exists(store.path)
    backup = _read(store.backup_path)
    _run(store.increment_controller_epoch())                 # the damaged file is never backed up
    assert _read(store.backup_path) == backup
    _run(store.increment_controller_epoch())
    assert dict(_run(_store(tmp_path).load()).topics) == {"a": a}


def test_a_missing_file_falls_back_to_the_previous_version_and_adds_topics_found_on_disk(tmp_path):
    store = _store(tmp_path)
    _run(store.load())
    a = _topic("a")
    _run(store.create_topics([a]))
    _run(store.create_topics([_topic("b")]))                 # only in the lost main file
    b_id = _run(store.load()).topics["b"].topic_id
    _partition_dir(tmp_path, "b-0", b_id, [(2, 0)])
    os.unlink(store.path)
    state = _run(_store(tmp_path).load())
    assert state.topics["a"] == a
    assert state.topics["b"].topic_id == b_id
    assert state.topics["b"].partitions[0] == PartitionRecord((3,), 3, 2, (3,))


def test_without_any_file_the_topics_are_rebuilt_from_the_partition_directories(tmp_path):
    other_dir = tmp_path / "second"
    os.makedirs(other_dir)
    a_id, b_id = uuid.uuid4(), uuid.uuid4()
    _partition_dir(tmp_path, "a-0", a_id, [(0, 0), (5, 10)])
    _partition_dir(other_dir, "a-2", a_id, [(1, 0)])          # a-1 is gone: created again, empty
    _partition_dir(tmp_path, "b-0", garbage_metadata=True)   # no readable id: a new one
    _partition_dir(tmp_path, "c-0", None)
    _partition_dir(tmp_path, "c-1", b_id, None)
    os.makedirs(tmp_path / "a-0.0123456789abcdef0123456789abcdef-delete")
    os.makedirs(tmp_path / "__cluster_metadata-0")
    store = _store(tmp_path, log_dirs=[str(tmp_path), str(other_dir)])
    state = _run(store.load())
    assert sorted(state.topics) == ["a", "b", "c"]
    a = state.topics["a"]
    assert a.topic_id == a_id and sorted(a.partitions) == [0, 1, 2]
    assert [a.partitions[i].leader_epoch for i in range(3)] == [5, 0, 1]
    assert all(p.replicas == (3,) and p.isr == (3,) and p.leader == 3 for p in a.partitions.values())
    assert dict(a.configs) == {}
    assert isinstance(state.topics["b"].topic_id, uuid.UUID)
    assert state.topics["c"].topic_id == b_id and sorted(state.topics["c"].partitions) == [0, 1]
    # Written at the first change, like any state.
    _run(store.increment_controller_epoch())
    assert dict(_run(_store(tmp_path).load()).topics) == dict(state.topics)


def test_a_new_broker_starts_empty_without_a_warning(tmp_path):
    state = _run(_store(tmp_path).load())
    assert dict(state.topics) == {} and state.controller_epoch == 0
    assert os.listdir(tmp_path) == []


def test_rebuilding_refuses_directories_that_disagree_about_a_topic_id(tmp_path):
    _partition_dir(tmp_path, "a-0", uuid.uuid4())
    _partition_dir(tmp_path, "a-1", uuid.uuid4())
    with pytest.raises(StartupError) as e:
        _run(_store(tmp_path).load())
    message = str(e.value)
    assert "\n" not in message
    assert "cluster-metadata.json: it is missing" in message
    assert os.path.join(str(tmp_path), "a-0", "partition.metadata") in message
    assert "restore" in message


def test_a_newer_format_is_refused_not_replaced(tmp_path):
    with open(tmp_path / "cluster-metadata.json", "w") as f:
        f.write('{"version": 7}')
    with pytest.raises(StartupError) as e:
        _run(_store(tmp_path).load())
    assert "format version 7" in str(e.value)
    assert os.listdir(tmp_path) == ["cluster-metadata.json"]
