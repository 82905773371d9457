"""JsonFileMetadataStore: durable before its Deferred fires, all-or-nothing, one write at a time, immutable records.

The thread pool is driven by the test (``ManualPool``), so what has happened
before and after the write reaches the disk can be observed exactly.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest
from twisted.internet.defer import ensureDeferred

from support.inline import InlineReactor, ManualThreadPool, SyncThreadPool
from twisted_kafka.config import StartupError
from twisted_kafka.controller.metadata_store import (
    STORE_FILE,
    JsonFileMetadataStore,
    PartitionRecord,
    topic_record,
)

from .helpers import make_store, run


class ManualPool(ManualThreadPool):
    """Queues work; the test also decides when a result reaches the reactor."""

    def run_now_deliver_later(self):
        """Run the oldest item now; its result reaches the reactor when the returned callable is called."""
        on_result, f, args, kwargs = self.queue.popleft()
        outcome: list = []
        SyncThreadPool.callInThreadWithCallback(self, lambda ok, result: outcome.append((ok, result)), f, *args,
                                                **kwargs)
        return lambda: on_result(*outcome[0])


def topic(name: str, partitions: int = 1, configs=None, topic_id=None):
    states = {i: PartitionRecord(replicas=(0,), leader=0, leader_epoch=0, isr=(0,)) for i in range(partitions)}
    return topic_record(name, topic_id or uuid.uuid4(), states, configs)


def on_disk(tmp_path) -> dict:
    return json.loads((tmp_path / STORE_FILE).read_text())


def fired(d) -> bool:
    return d.called


def test_an_empty_directory_is_an_empty_state(tmp_path):
    state = run(make_store(tmp_path).load())
    assert (state.controller_epoch, dict(state.topics), dict(state.broker_configs)) == (0, {}, {})
    assert not (tmp_path / STORE_FILE).exists()


def test_a_write_is_on_disk_before_its_deferred_fires(tmp_path):
    pool = ManualPool()
    store = JsonFileMetadataStore(str(tmp_path), reactor=InlineReactor(), threadpool=pool)
    load = ensureDeferred(store.load())
    pool.run_one()
    assert fired(load)

    d = ensureDeferred(store.create_topics([topic("t", 2, {"retention.ms": "5"})]))
    assert not fired(d) and not (tmp_path / STORE_FILE).exists()
    assert "t" not in run(store.load()).topics          # not current before it is durable
    pool.run_one()
    assert fired(d) and d.result is None
    assert set(on_disk(tmp_path)["topics"]) == {"t"}
    assert not (tmp_path / (STORE_FILE + ".tmp")).exists()
    assert "t" in run(store.load()).topics


def test_everything_survives_a_restart(tmp_path):
    store = make_store(tmp_path)
    t = topic("t", 2, {"retention.ms": "5"})
    assert run(store.increment_controller_epoch()) == 1
    assert run(store.increment_controller_epoch()) == 2
    run(store.create_topics([t, topic("gone")]))
    run(store.delete_topics(["gone"]))
    run(store.set_partitions("t", {1: PartitionRecord((0,), 0, 3, (0,), partition_epoch=4),
                                   2: PartitionRecord((0,), 0, 0, (0,))}))
    run(store.set_topic_configs("t", {"segment.ms": "100"}))
    run(store.set_broker_configs("", {"log.roll.ms": "5000"}))
    run(store.set_broker_configs("0", {"log.retention.bytes": "1"}))
    run(store.set_broker_configs("0", {}))                     # an empty layer is forgotten

    state = run(make_store(tmp_path).load())
    assert state.controller_epoch == 2
    assert list(state.topics) == ["t"]
    reloaded = state.topics["t"]
    assert reloaded.topic_id == t.topic_id and reloaded.configs == {"segment.ms": "100"}
    assert dict(reloaded.partitions) == {0: t.partitions[0], 1: PartitionRecord((0,), 0, 3, (0,), 4),
                                         2: PartitionRecord((0,), 0, 0, (0,))}
    assert reloaded.replication_factor == 1
    assert {k: dict(v) for k, v in state.broker_configs.items()} == {"": {"log.roll.ms": "5000"}}


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    store = make_store(tmp_path)
    run(store.create_topics([topic("kept")]))
    before = (tmp_path / STORE_FILE).read_bytes()

    def broken(payload):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "_write", broken)
    with pytest.raises(OSError):
        run(store.create_topics([topic("lost")]))
    with pytest.raises(OSError):
        run(store.increment_controller_epoch())
    state = run(store.load())
    assert list(state.topics) == ["kept"] and state.controller_epoch == 0
    assert (tmp_path / STORE_FILE).read_bytes() == before

    monkeypatch.undo()                                         # the disk recovers: the store still works
    run(store.create_topics([topic("next")]))
    assert sorted(run(make_store(tmp_path).load()).topics) == ["kept", "next"]


def test_an_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    store = make_store(tmp_path)
    run(store.create_topics([topic("kept")]))
    before = (tmp_path / STORE_FILE).read_bytes()
    monkeypatch.setattr("os.replace", lambda src, dst: (_ for _ in ()).throw(OSError("crash before rename")))
    with pytest.raises(OSError):
        run(store.delete_topics(["kept"]))
    assert (tmp_path / STORE_FILE).read_bytes() == before
    assert list(run(store.load()).topics) == ["kept"]


def test_concurrent_writes_are_serialised_in_call_order(tmp_path):
    pool = ManualPool()
    store = JsonFileMetadataStore(str(tmp_path), reactor=InlineReactor(), threadpool=pool)
    ensureDeferred(store.load())
    pool.run_one()
    first = ensureDeferred(store.create_topics([topic("a")]))
    second = ensureDeferred(store.set_topic_configs("a", {"retention.ms": "1"}))
    third = ensureDeferred(store.create_topics([topic("b")]))
    assert len(pool.queue) == 1                          # one write at a time
    pool.run_one()
    assert fired(first) and not fired(second) and not fired(third)
    assert on_disk(tmp_path)["topics"]["a"]["configs"] == {}
    assert len(pool.queue) == 1
    pool.run_one()
    assert fired(second) and not fired(third)
    # the second change applied to the state the first one left
    assert on_disk(tmp_path)["topics"]["a"]["configs"] == {"retention.ms": "1"}
    pool.run_all()
    assert fired(third)
    assert sorted(on_disk(tmp_path)["topics"]) == ["a", "b"]
    assert on_disk(tmp_path)["topics"]["a"]["configs"] == {"retention.ms": "1"}


def test_a_slow_first_load_does_not_undo_a_write(tmp_path):
    """Two changes before the store was ever loaded: each starts a load.  A load
    that read the file before the first write but delivers after it must not
    replace the newer state (which would lose the first change on the next write)."""
    pool = ManualPool()
    store = JsonFileMetadataStore(str(tmp_path), reactor=InlineReactor(), threadpool=pool)
    first = ensureDeferred(store.create_topics([topic("a")]))
    second = ensureDeferred(store.create_topics([topic("b")]))
    assert len(pool.queue) == 2                          # both are loading
    deliver_first_read = pool.run_now_deliver_later()
    deliver_second_read = pool.run_now_deliver_later()   # reads the empty directory too ...
    deliver_first_read()
    pool.run_all()                                       # ... but "a" is written before it arrives
    assert fired(first) and set(on_disk(tmp_path)["topics"]) == {"a"}
    deliver_second_read()
    pool.run_all()
    assert fired(second)
    assert sorted(on_disk(tmp_path)["topics"]) == ["a", "b"]
    assert sorted(run(store.load()).topics) == ["a", "b"]


def test_records_are_immutable(tmp_path):
    store = make_store(tmp_path)
    original = topic("t", 1, {"retention.ms": "5"})
    run(store.create_topics([original]))
    state = run(store.load())
    record = state.topics["t"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.configs = {}                                     # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.partitions[0].leader = 7                         # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.controller_epoch = 9                              # type: ignore[misc]
    for mapping in (state.topics, state.broker_configs, record.partitions, record.configs):
        with pytest.raises(TypeError):
            mapping["x"] = None                                 # type: ignore[index]

    # changes make new records; what was handed out before stays as it was
    grown = record.with_partitions({1: PartitionRecord((0,), 0, 0, (0,))})
    retuned = record.with_configs({"segment.ms": "1"})
    assert sorted(grown.partitions) == [0, 1] and sorted(record.partitions) == [0]
    assert retuned.configs == {"segment.ms": "1"} and record.configs == {"retention.ms": "5"}
    with pytest.raises(TypeError):
        grown.partitions[2] = None                              # type: ignore[index]
    run(store.set_topic_configs("t", {"segment.ms": "2"}))
    assert record.configs == {"retention.ms": "5"} and state.topics["t"] is record
    assert run(store.load()).topics["t"].configs == {"segment.ms": "2"}

    # a record built from mutable mappings does not follow them
    configs = {"retention.ms": "5"}
    built = topic_record("u", uuid.uuid4(), {}, configs)
    configs["retention.ms"] = "6"
    assert built.configs == {"retention.ms": "5"}


def test_an_unknown_format_version_is_refused(tmp_path):
    (tmp_path / STORE_FILE).write_text(json.dumps({"version": 99, "controller_epoch": 1, "topics": {}}))
    with pytest.raises(StartupError, match="format version 99, newer than this broker reads"):
        run(make_store(tmp_path).load())


def _mode(path) -> int:
    import os
    import stat

    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_file_and_its_backup_are_the_broker_users_only_even_if_written_world_readable_before(tmp_path):
    import os

    store = make_store(tmp_path)
    run(store.set_broker_configs("0", {"log.retention.ms": "5"}))
    run(store.set_broker_configs("0", {"log.retention.ms": "6"}))
    main, backup = tmp_path / STORE_FILE, tmp_path / (STORE_FILE + ".bak")
    assert _mode(main) == 0o600 and _mode(backup) == 0o600

    # Written world-readable by an older version (and a temporary file a crash left behind so):
    os.chmod(main, 0o644)
    os.chmod(backup, 0o644)
    (tmp_path / (STORE_FILE + ".tmp")).write_bytes(b"{}")
    os.chmod(tmp_path / (STORE_FILE + ".tmp"), 0o666)
    reloaded = make_store(tmp_path)
    assert run(reloaded.load()).broker_configs["0"] == {"log.retention.ms": "6"}
    assert _mode(main) == 0o600 and _mode(backup) == 0o600         # made private on load
    os.chmod(main, 0o644)
    run(reloaded.set_broker_configs("0", {"log.retention.ms": "7"}))
    assert _mode(main) == 0o600 and _mode(backup) == 0o600         # and on every write
