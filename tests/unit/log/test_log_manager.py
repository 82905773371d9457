"""LogManager: loading, the registry of UnifiedLogs, flush policy, periodic tasks, deletion,
clean shutdown."""

from __future__ import annotations

import os
import uuid

import pytest

from support.inline import InlineReactor, ManualThreadPool, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.checkpoints import (
    read_offset_checkpoint,
    read_partition_metadata,
    topic_id_to_str,
)
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, records_of


def _config(tmp_path, **props):
    base = {"log.dirs": str(tmp_path / "data")}
    base.update({k.replace("_", "."): str(v) for k, v in props.items()})
    return KafkaConfig.from_props(base)


def _manager(tmp_path, pool=None, **props):
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    manager = LogManager(_config(tmp_path, **props), reactor=reactor,
                         threadpool=pool or SyncThreadPool())
    return manager, reactor


def _started(tmp_path, **props):
    manager, reactor = _manager(tmp_path, **props)
    d = manager.startService()
    assert d.called and d.result is None
    return manager, reactor


def _result(d):
    assert d.called, "Deferred has not fired"
    results = []
    d.addBoth(results.append)
    return results[0]


def test_start_on_an_empty_dir_and_create_log(tmp_path):
    manager, _ = _started(tmp_path)
    topic_id = uuid.uuid4()
    log = manager.create_log("orders", 3, topic_id, {"segment.bytes": "1000"})
    assert manager.get_log("orders", 3) is log
    assert manager.create_log("orders", 3, topic_id) is log        # idempotent
    assert log.config.segment_bytes == 1000
    assert log.dir == str(tmp_path / "data" / "orders-3")
    assert read_partition_metadata(os.path.join(log.dir, "partition.metadata")) == topic_id
    assert len(topic_id_to_str(topic_id)) == 22
    with pytest.raises(KafkaError) as e:
        manager.create_log("orders", 3, uuid.uuid4())
    assert e.value.code == ErrorCode.INCONSISTENT_TOPIC_ID
    assert manager.all_logs() == [log]


def test_broker_defaults_reach_the_log_config(tmp_path):
    manager, _ = _started(tmp_path, log_retention_hours=2, log_segment_bytes=4096,
                          log_message_timestamp_type="LogAppendTime")
    log = manager.create_log("t", 0)
    assert log.config.retention_ms == 2 * 3_600_000
    assert log.config.segment_bytes == 4096
    assert log.config.message_timestamp_type == "LogAppendTime"
    manager.update_topic_config("t", {"retention.ms": "1000"})
    assert log.config.retention_ms == 1000 and log.config.segment_bytes == 4096


def test_flush_policy_one_fsyncs_before_the_append_fires(tmp_path):
    pool = ManualThreadPool()
    manager, _ = _manager(tmp_path, pool=pool, log_flush_interval_messages=1)
    manager.startService()
    pool.run_all()
    log = manager.create_log("t", 0)
    events = []
    real_flush = log.local_log.flush

    def recording_flush(up_to=None, now_ms=None):
        events.append(("fsync", up_to))
        return real_flush(up_to, now_ms)

    log.local_log.flush = recording_flush
    d = log.append_as_leader(batch(2), 0)
    d.addCallback(lambda info: events.append(("acked", info.last_offset)))
    assert events == [] and len(pool.queue) == 1     # written, fsync queued, not acked
    assert log.log_end_offset == 2 and log.recovery_point == 0
    pool.run_one()
    assert events == [("fsync", 2), ("acked", 1)]
    assert log.recovery_point == 2


def test_fsyncs_are_coalesced_and_acks_stay_in_order(tmp_path):
    pool = ManualThreadPool()
    manager, _ = _manager(tmp_path, pool=pool, log_flush_interval_messages=1)
    manager.startService()
    pool.run_all()
    log = manager.create_log("t", 0)
    acked = []
    for _ in range(5):
        log.append_as_leader(batch(1), 0).addCallback(lambda info: acked.append(info.first_offset))
    assert log.log_end_offset == 5 and acked == []
    assert len(pool.queue) == 1                      # one fsync running, the rest wait
    pool.run_one()
    assert acked == [0]
    assert len(pool.queue) == 1                      # a single fsync covers the four others
    pool.run_one()
    assert acked == [0, 1, 2, 3, 4]
    assert not pool.queue


def test_without_flush_policy_append_fires_at_once(tmp_path):
    manager, _ = _started(tmp_path)
    log = manager.create_log("t", 0)
    info = _result(log.append_as_leader(batch(3), 0))
    assert info.last_offset == 2 and log.recovery_point == 0


def test_append_errors_come_back_as_failed_deferreds(tmp_path):
    manager, _ = _started(tmp_path)
    log = manager.create_log("t", 0)
    broken = bytearray(batch(2))
    broken[-1] ^= 1
    failure = _result(log.append_as_leader(bytes(broken), 0))
    assert failure.check(KafkaError)
    assert failure.value.code == ErrorCode.CORRUPT_MESSAGE
    failure = _result(log.append_as_leader(b"\x00" * 70, 0))    # magic 0
    assert failure.value.code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert log.log_end_offset == 0


def test_flush_scheduler_honours_flush_ms(tmp_path):
    manager, reactor = _started(tmp_path, log_flush_interval_ms=5000)
    log = manager.create_log("t", 0)
    log.append_as_leader(batch(1), 0)
    reactor.advance(1)
    assert log.recovery_point == 0
    reactor.advance(4)
    assert log.recovery_point == 1


def test_retention_runs_periodically_and_deletes_files_after_the_delay(tmp_path):
    manager, reactor = _started(tmp_path, log_retention_ms=60_000,
                                log_retention_check_interval_ms=10_000,
                                log_segment_delete_delay_ms=30_000)
    log = manager.create_log("t", 0)
    log.local_log.append_as_leader(batch(2, ts=NOW - 120_000), 0, NOW)
    log.local_log.roll()
    log.local_log.append_as_leader(batch(2, ts=NOW), 0, NOW)
    reactor.advance(10)
    assert [s.base_offset for s in log.local_log.segments] == [2]
    assert log.log_start_offset == 2
    names = os.listdir(log.dir)
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.log" not in names
    reactor.advance(30)
    assert not any(n.startswith("00000000000000000000") for n in os.listdir(log.dir))


def test_delete_log_renames_then_removes_after_the_delay(tmp_path):
    manager, reactor = _started(tmp_path, log_segment_delete_delay_ms=5000)
    log = manager.create_log("gone", 1)
    log.local_log.append_as_leader(batch(1), 0, NOW)
    data = tmp_path / "data"
    d = manager.delete_log("gone", 1)
    assert manager.get_log("gone", 1) is None
    names = os.listdir(data)
    assert "gone-1" not in names
    [renamed] = [n for n in names if n.startswith("gone-1.")]
    assert renamed.endswith("-delete") and len(renamed) == len("gone-1.") + 32 + len("-delete")
    assert not d.called
    reactor.advance(5)
    assert _result(d) is True
    assert not [n for n in os.listdir(data) if n.startswith("gone-1")]
    assert _result(manager.delete_log("gone", 1)) is False


def test_clean_shutdown_writes_checkpoints_and_marker_and_restart_skips_recovery(tmp_path):
    manager, reactor = _started(tmp_path, log_segment_bytes=500)
    log = manager.create_log("t", 0, uuid.uuid4())
    for _ in range(10):
        log.append_as_leader(batch(3), 0)
    log.delete_records_before(4)
    d = manager.stopService()
    assert _result(d) is None
    data = tmp_path / "data"
    assert (data / ".kafka_cleanshutdown").exists()
    assert read_offset_checkpoint(str(data / "recovery-point-offset-checkpoint")) == {("t", 0): 30}
    assert read_offset_checkpoint(str(data / "log-start-offset-checkpoint")) == {("t", 0): 4}

    manager, _ = _started(tmp_path, log_segment_bytes=500)
    assert not (data / ".kafka_cleanshutdown").exists()          # removed at start
    log = manager.get_log("t", 0)
    assert log.recovery_stats.segments_recovered == 0
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (4, 30, 30)
    assert _result(log.append_as_leader(batch(1), 0)).first_offset == 30


def test_unclean_restart_recovers_and_keeps_acknowledged_records(tmp_path):
    manager, _ = _started(tmp_path, log_flush_interval_messages=1)
    log = manager.create_log("t", 0)
    for _ in range(4):
        log.append_as_leader(batch(2), 0)
    manager.checkpoint_recovery_points()
    # No stopService: the process "dies"; a torn write follows the last ack.
    with open(os.path.join(log.dir, "00000000000000000000.log"), "ab") as f:
        f.write(batch(5)[:40])
    manager, _ = _started(tmp_path)
    log = manager.get_log("t", 0)
    assert log.log_end_offset == 8
    assert log.recovery_stats.segments_recovered == 1
    assert [o for o, _ in records_of(log.local_log.read(0, 1 << 20))] == list(range(8))


def test_non_partition_entries_are_ignored(tmp_path):
    data = tmp_path / "data"
    (data / "__cluster_metadata-0").mkdir(parents=True)
    (data / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"not ours")
    (data / "metadata").mkdir()
    (data / "t-0-future").mkdir()
    (data / "meta.properties").write_text("version=1\n")
    stale = data / ("old-0." + "a" * 32 + "-delete")
    stale.mkdir()
    (stale / "00000000000000000000.log").write_bytes(b"")
    manager, _ = _started(tmp_path)
    assert manager.all_logs() == []
    assert not stale.exists()
    assert (data / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes() == b"not ours"
    assert (data / "meta.properties").exists()


def test_logs_spread_over_several_dirs_and_reload(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    props = {"log.dirs": ",".join(map(str, dirs))}
    reactor = InlineReactor()
    manager = LogManager(KafkaConfig.from_props(props), reactor=reactor, threadpool=SyncThreadPool())
    manager.startService()
    for p in range(4):
        manager.create_log("t", p).local_log.append_as_leader(batch(p + 1), 0, NOW)
    assert sorted(manager.log_dir_of("t", p) for p in range(4)) == sorted(list(map(str, dirs)) * 2)
    _result(manager.stopService())
    manager = LogManager(KafkaConfig.from_props(props), reactor=reactor, threadpool=SyncThreadPool())
    manager.startService()
    assert {(log.partition, log.log_end_offset) for log in manager.all_logs()} == {(p, p + 1) for p in range(4)}


def test_recovery_runs_in_the_thread_pool(tmp_path):
    manager, _ = _started(tmp_path)
    manager.create_log("t", 0)
    manager.create_log("t", 1)
    _result(manager.stopService())
    pool = ManualThreadPool()
    manager, _ = _manager(tmp_path, pool=pool, num_recovery_threads_per_data_dir=1)
    d = manager.startService()
    assert not d.called
    pool.run_one()                        # the directory scan
    # One job per recovery thread, each opening its logs one after the other (no hand-off
    # between the reactor and the pool per log).
    assert [f.__name__ for _, f, _, _ in pool.queue] == ["open_all"]
    pool.run_one()
    assert len(manager.all_logs()) == 2   # both loaded by that one job
    pool.run_all()                        # the clean-shutdown marker's removal
    assert d.called


def test_recovery_threads_share_the_logs(tmp_path):
    manager, _ = _started(tmp_path)
    for p in range(5):
        manager.create_log("t", p)
    _result(manager.stopService())
    pool = ManualThreadPool()
    manager, _ = _manager(tmp_path, pool=pool, num_recovery_threads_per_data_dir=2)
    d = manager.startService()
    pool.run_one()                        # the directory scan
    assert [f.__name__ for _, f, _, _ in pool.queue] == ["open_all", "open_all"]
    assert [len(args[0]) for _, _, args, _ in pool.queue] == [3, 2]
    pool.run_all()
    assert d.called and sorted(log.partition for log in manager.all_logs()) == [0, 1, 2, 3, 4]


def test_logs_are_loaded_in_jobs_of_bounded_size():
    from twisted_kafka.log.log_loader import LOGS_PER_JOB, in_chunks

    items = list(range(2 * LOGS_PER_JOB + 1))
    chunks = in_chunks(items, 1)
    assert [len(c) for c in chunks] == [LOGS_PER_JOB, LOGS_PER_JOB, 1]
    assert [x for c in chunks for x in c] == items
    assert in_chunks([], 4) == [] and in_chunks([1], 4) == [[1]]


def test_stop_without_a_successful_load_writes_no_marker(tmp_path):
    data = tmp_path / "data"
    (data / "t-0" / "00000000000000000000.log").mkdir(parents=True)   # cannot be opened
    manager, _ = _manager(tmp_path)
    d = manager.startService()
    assert _result(d).check(IsADirectoryError)
    _result(manager.stopService())
    assert not (data / ".kafka_cleanshutdown").exists()
    assert not (data / "recovery-point-offset-checkpoint").exists()


def test_a_deleted_partition_can_be_created_again_at_once(tmp_path):
    pool = ManualThreadPool()
    manager, _ = _manager(tmp_path, pool=pool)
    manager.startService()
    pool.run_all()
    old = manager.create_log("t", 0)
    old.inline_write_max_bytes = 0                     # keep a write in flight
    old.append_as_leader(batch(3), 0)
    manager.delete_log("t", 0)
    new = manager.create_log("t", 0)
    assert new is not old and new.log_end_offset == 0
    failure = _result(old.append_as_leader(batch(1), 0))
    assert failure.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    pool.run_all()                                     # the old write lands in the renamed dir
    new.inline_write_max_bytes = 1 << 20
    new.append_as_leader(batch(1), 0)
    assert old.committed_end_offset == 3 and new.log_end_offset == 1
    assert [o for o, _ in records_of(_result(new.read(0, 1 << 20)))] == [0]


def test_create_log_applies_a_topics_overrides_once_not_per_partition(tmp_path):
    """LeaderAndIsr hands every partition its topic's overrides; applying them visits every log,
    so doing it per partition made a start with 25,000 partitions quadratic (minutes)."""
    manager, _ = _started(tmp_path)
    applied = []
    update = manager.update_topic_config
    manager.update_topic_config = lambda topic, overrides: applied.append(topic) or update(topic, overrides)
    for p in range(50):
        manager.create_log("t", p, None, {"retention.ms": "1000"})
    assert applied == ["t"]
    manager.create_log("t", 0, None, {"retention.ms": "2000"})          # a change is applied to all
    assert applied == ["t", "t"]
    assert {log.config.retention_ms for log in manager.all_logs()} == {2000}


def test_the_recovery_point_is_checkpointed_once_a_finished_segment_is_flushed(tmp_path):
    # After a crash, recovery then starts past every finished segment, whatever
    # log.flush.offset.checkpoint.interval.ms says.
    manager, _ = _started(tmp_path, log_segment_bytes=500)
    log = manager.create_log("t", 0)
    path = os.path.join(manager.log_dirs[0], "recovery-point-offset-checkpoint")
    for _ in range(6):
        _result(log.append_as_leader(batch(3, value_size=40), 0))
    bases = [s.base_offset for s in log.local_log.segments]
    assert len(bases) > 2
    assert read_offset_checkpoint(path) == {("t", 0): bases[-1]}


def test_new_logs_go_to_the_dir_with_fewest_logs_as_logs_come_and_go():
    from twisted_kafka.log.log_registry import LogRegistry

    registry = LogRegistry(["/a", "/b"])
    placed = []
    for p in range(4):
        log_dir = registry.dir_for_new_log()
        registry.add(("t", p), object(), log_dir)       # type: ignore[arg-type]
        placed.append(log_dir)
    assert placed == ["/a", "/b", "/a", "/b"]
    registry.remove(("t", 0))
    registry.remove(("t", 2))                           # /a now holds none, /b two
    assert registry.dir_for_new_log() == "/a"
    registry.add(("t", 1), object(), "/a")              # moved: counted once, in its new dir
    registry.add(("u", 0), object(), "/a")
    assert registry.dir_for_new_log() == "/b"
