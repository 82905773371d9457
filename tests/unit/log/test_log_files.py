"""On-disk formats: offset index, checkpoints, names; and LogConfig."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.checkpoints import (
    CheckpointError,
    read_epoch_checkpoint,
    read_offset_checkpoint,
    read_partition_metadata,
    topic_id_from_str,
    topic_id_to_str,
    write_epoch_checkpoint,
    write_offset_checkpoint,
    write_partition_metadata,
)
from twisted_kafka.log.index import CorruptIndexError, OffsetIndex
from twisted_kafka.log.layout import (
    is_delete_dir,
    parse_partition_dir,
    parse_segment_file,
    segment_file_name,
)
from twisted_kafka.log.log_config import LONG_MAX, LogConfig


def test_offset_index_entries_are_kafka_format(tmp_path):
    index = OffsetIndex.create(str(tmp_path / "x.index"), 1000, 80)
    index.append(1000, 0)
    index.append(1010, 4200)
    index.append(1025, 9000)
    # Entries reach the file when the segment is flushed or closed (no descriptor is held meanwhile).
    assert (tmp_path / "x.index").read_bytes() == b"" and index.pending_entries == 3
    index.flush()
    raw = (tmp_path / "x.index").read_bytes()
    assert raw == struct.pack(">iiiiii", 0, 0, 10, 4200, 25, 9000)
    assert index.lookup(999) == (1000, 0)
    assert index.lookup(1010) == (1010, 4200)
    assert index.lookup(1024) == (1010, 4200)
    assert index.lookup(5000) == (1025, 9000)
    index.truncate_to_position(4200)
    assert len(index) == 1 and (tmp_path / "x.index").read_bytes() == raw[:8]


def test_offset_index_open_checks_sanity_and_fullness(tmp_path):
    path = tmp_path / "x.index"
    index = OffsetIndex.create(str(path), 0, 24)
    for i in range(3):
        index.append(i * 10, i * 100)
    assert index.is_full
    index.write_pending()
    again = OffsetIndex.open(str(path), 0, 24, segment_size=1000)
    assert len(again) == 3 and again.last_entry == (20, 200)
    assert again.lookup(15) == (10, 100)
    with pytest.raises(CorruptIndexError):
        OffsetIndex.open(str(path), 0, 24, segment_size=150)      # position past the data
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CorruptIndexError):
        OffsetIndex.open(str(path), 0, 24, segment_size=1000)


def test_offset_checkpoint_format_roundtrip(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offset_checkpoint(path, {("b", 1): 7, ("a-b", 0): 12})
    assert Path(path).read_text() == "0\n2\na-b 0 12\nb 1 7\n"
    assert read_offset_checkpoint(path) == {("b", 1): 7, ("a-b", 0): 12}
    assert read_offset_checkpoint(str(tmp_path / "missing")) == {}
    Path(path).write_text("0\n3\na 0 1\n")
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(path)


def test_epoch_checkpoint_and_partition_metadata_formats(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    write_epoch_checkpoint(path, [(0, 0), (4, 100)])
    assert Path(path).read_text() == "0\n2\n0 0\n4 100\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (4, 100)]
    topic_id = uuid.UUID("12345678-1234-5678-1234-567812345678")
    meta = str(tmp_path / "partition.metadata")
    write_partition_metadata(meta, topic_id)
    assert Path(meta).read_text() == f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n"
    assert read_partition_metadata(meta) == topic_id
    assert topic_id_from_str(topic_id_to_str(topic_id)) == topic_id
    assert topic_id_to_str(topic_id) == "EjRWeBI0VngSNFZ4EjRWeA"


def test_names():
    assert segment_file_name(42, ".log") == "00000000000000000042.log"
    assert parse_segment_file("00000000000000000042.timeindex") == (42, "timeindex", "")
    assert parse_segment_file("00000000000000000042.log.deleted") == (42, "log", ".deleted")
    assert parse_segment_file("leader-epoch-checkpoint") is None
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("__consumer_offsets-3") == ("__consumer_offsets", 3)
    for name in ("__cluster_metadata-0", "meta.properties", "t-0-future", "t-x", "-1",
                 "t-0." + "a" * 32 + "-delete", "bad topic-0"):
        assert parse_partition_dir(name) is None, name
    assert is_delete_dir("t-0." + "a" * 32 + "-delete")
    assert not is_delete_dir("t-0-delete")


def test_log_config_from_topic_keys_typed_or_strings():
    cfg = LogConfig.from_topic_config({"segment.bytes": "2048", "retention.ms": -1,
                                       "cleanup.policy": "compact,delete", "preallocate": "true",
                                       "min.insync.replicas": 2})
    assert cfg.segment_bytes == 2048 and cfg.retention_ms == -1
    assert cfg.cleanup_policy == ("compact", "delete") and cfg.delete_enabled
    assert cfg.preallocate is True
    assert LogConfig.from_topic_config({}).flush_interval_messages == LONG_MAX
    with pytest.raises(ValueError, match="segment.bytes"):
        LogConfig.from_topic_config({"segment.bytes": "lots"})
    with pytest.raises(ValueError):
        LogConfig.from_topic_config({"message.timestamp.type": "Whenever"})


def test_log_config_from_broker_synonyms():
    broker = KafkaConfig.from_props({"log.retention.minutes": "3", "log.roll.hours": "2",
                                     "log.flush.interval.messages": "1",
                                     "message.max.bytes": "5000"})
    cfg = LogConfig.from_broker_config(broker)
    assert cfg.retention_ms == 180_000
    assert cfg.segment_ms == 7_200_000
    assert cfg.flush_interval_messages == 1
    assert cfg.max_message_bytes == 5000
    assert LogConfig.from_broker_config(broker, {"retention.ms": "10"}).retention_ms == 10
