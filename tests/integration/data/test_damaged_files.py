"""A broker process started on log dirs with one file damaged or missing, each in turn.

For every case the broker starts, serves everything that is intact, says in
one log line which file it found damaged (no traceback), and loses nothing
that was intact:

* ``cluster-metadata.json`` missing, empty, truncated or garbage: the
  previous version (``cluster-metadata.json.bak``) is used, or — when there
  is none — the topics are rebuilt from the partition directories
  (``partition.metadata`` holds each topic's id); rebuilding is refused, with
  a one-line reason naming the file and what to do, when the directories
  disagree about a topic's id;
* garbage ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``leader-epoch-checkpoint`` or ``partition.metadata``: discarded and
  rebuilt;
* a flipped byte in an older segment, below the recovery point: reported
  (fetches landing in the damaged batch get CORRUPT_MESSAGE), never a
  reason to cut the log — every later segment is kept.
"""

from __future__ import annotations

import contextlib
import glob
import os

import pytest

from support.broker_process import BrokerExited
from support.raw_client import RawClient
from support.reading import read_to_end
from support.wait import wait_until
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.batch import iter_batch_headers
from twisted_kafka.protocol.records.builder import build_batch

from .helpers import fetch_request, produce_request
from .test_durability import topic_state

TOPICS = {"alpha": 2, "beta": 1}
BATCHES = 30                      # per partition, 4 records of ~100 bytes each: several 4 KiB segments
OVERRIDES = {"log.segment.bytes": "4096"}


def create_topics(broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(t, n, config={"retention.ms": "987654321"} if t == "beta" else {})
                                   for t, n in TOPICS.items()])
    for future in futures.values():
        future.result(10)


def produce_some(broker, start: int = 0, batches: int = BATCHES) -> None:
    with RawClient(broker.data_port) as client:
        for n in range(start, start + batches):
            for topic, partitions in TOPICS.items():
                for p in range(partitions):
                    records = [(f"{topic}-{p}-{n}-{i}".encode(), b"v" * 100) for i in range(4)]
                    response = client.request(produce_request({topic: {p: build_batch(records)}}))
                    (entry,) = response.responses[0].partition_responses
                    assert (entry.error_code, entry.base_offset) == (0, 4 * n), entry


def read_partition(broker, topic: str, partition: int, timeout: float = 20) -> list:
    """[(offset, key)] of one partition, from offset 0 to its end."""
    return [(offset, key) for offset, key, _ in read_to_end(broker.bootstrap, topic, [partition],
                                                            timeout=timeout)[partition]]


def contents(broker, skip=()) -> dict:
    """{(topic, partition): [(offset, key)]} of every topic (but ``skip``)."""
    return {(t, p): read_partition(broker, t, p) for t, partitions in TOPICS.items() for p in range(partitions)
            if (t, p) not in skip}


def expected(batches: int = BATCHES) -> dict:
    return {(t, p): [(4 * n + i, f"{t}-{p}-{n}-{i}".encode()) for n in range(batches) for i in range(4)]
            for t, partitions in TOPICS.items() for p in range(partitions)}


@pytest.fixture
def populated(broker_factory):
    """A broker with TOPICS filled, stopped cleanly and started and stopped once more
    (so every metadata file has a previous version); returns (broker, topic ids)."""
    broker = broker_factory(OVERRIDES)
    create_topics(broker)
    produce_some(broker)
    ids = {t: topic_state(broker, t)[0] for t in TOPICS}
    broker.restart()
    assert broker.stop() == 0
    return broker, ids


def meta_path(broker, name: str = "cluster-metadata.json") -> str:
    return os.path.join(broker.log_dirs[0], name)


def remove_backup(broker) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(meta_path(broker) + ".bak")


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def assert_intact(broker, ids, *, batches: int = BATCHES) -> None:
    assert contents(broker) == expected(batches)
    for topic, topic_id in ids.items():
        state_id, epochs = topic_state(broker, topic)
        assert state_id == topic_id
        assert sorted(epochs) == list(range(TOPICS[topic]))
    # Appends continue at the right offsets.
    produce_some(broker, batches, 1)


def single_line_about(broker, name: str) -> str:
    text = broker.log_text(since_start=True)
    assert "Traceback" not in text, text[-4000:]
    lines = [line for line in text.splitlines() if name in line and ("#warn" in line or "#error" in line
                                                                     or "#critical" in line)]
    assert lines, f"no warning naming {name}:\n{text[-4000:]}"
    return lines[0]


# -- cluster-metadata.json ---------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_damaged_metadata_falls_back_to_the_previous_version(populated, damage):
    broker, ids = populated
    path = meta_path(broker)
    data = read_bytes(path)
    assert os.path.exists(path + ".bak")
    with open(path, "wb") as fh:
        fh.write({"empty": b"", "truncated": data[:len(data) // 2], "garbage": os.urandom(300)}[damage])
    broker.start()
    line = single_line_about(broker, "cluster-metadata.json")
    assert "cluster-metadata.json.bak" in line
    assert_intact(broker, ids)
    # The topic config came back with the previous version.
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.describe_configs([ConfigResource("topic", "beta")]).values()
    assert future.result(10)["retention.ms"].value == "987654321"
    broker.restart()
    assert_intact(broker, ids, batches=BATCHES + 1)


def test_missing_metadata_is_rebuilt_from_the_partition_directories(populated):
    broker, ids = populated
    os.unlink(meta_path(broker))
    remove_backup(broker)
    broker.start()
    line = single_line_about(broker, "cluster-metadata.json")
    assert "rebuilt" in line and "alpha" in line and "beta" in line
    assert_intact(broker, ids)
    broker.restart()
    assert_intact(broker, ids, batches=BATCHES + 1)


def test_garbage_metadata_without_a_previous_version_is_rebuilt(populated):
    broker, ids = populated
    with open(meta_path(broker), "wb") as fh:
        fh.write(b"{\"version\": 1, \"topics\": {\"alpha\": ")
    remove_backup(broker)
    broker.start()
    assert "rebuilt" in single_line_about(broker, "cluster-metadata.json")
    assert_intact(broker, ids)


def test_rebuilding_refuses_partitions_that_disagree_about_a_topic_id(populated):
    broker, _ = populated
    os.unlink(meta_path(broker))
    remove_backup(broker)
    other = os.path.join(broker.log_dirs[0], "alpha-1", "partition.metadata")
    with open(other, "w") as fh:
        fh.write("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    with pytest.raises(BrokerExited) as exited:
        broker.start()
    assert exited.value.returncode == 1
    text = broker.log_text(since_start=True)
    assert "Traceback" not in text, text[-4000:]
    (line,) = [line for line in text.splitlines() if "Broker startup failed" in line]
    assert "cluster-metadata.json" in line and "alpha" in line and "partition.metadata" in line


# -- checkpoints -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint"])
def test_garbage_dir_checkpoint_is_discarded(populated, name):
    broker, ids = populated
    os.unlink(os.path.join(broker.log_dirs[0], ".kafka_cleanshutdown"))      # as after a crash
    with open(os.path.join(broker.log_dirs[0], name), "wb") as fh:
        fh.write(b"\xff\xfe garbage \x00\x01" * 10)
    broker.start()
    single_line_about(broker, name)
    assert_intact(broker, ids)
    from twisted_kafka.log.checkpoints import read_offset_checkpoint
    # Written again at once: every user partition, and the broker's internal topics
    # (``__connection_events``; ``__consumer_offsets`` once any client looked up a group).
    written = set(read_offset_checkpoint(os.path.join(broker.log_dirs[0], name)))
    assert {tp for tp in written if not tp[0].startswith("__")} == {
        (t, p) for t, n in TOPICS.items() for p in range(n)}
    assert ("__connection_events", 0) in written


def test_garbage_leader_epoch_checkpoint_is_rebuilt_from_the_batches(populated):
    broker, ids = populated
    path = os.path.join(broker.log_dirs[0], "alpha-0", "leader-epoch-checkpoint")
    with open(path, "wb") as fh:
        fh.write(b"\x00\x9f\x92\x96 not a checkpoint")
    broker.start()
    single_line_about(broker, "leader-epoch-checkpoint")
    assert_intact(broker, ids)
    assert read_bytes(path) == b"0\n1\n0 0\n"


def test_garbage_partition_metadata_is_rebuilt_from_the_controller(populated):
    broker, ids = populated
    path = os.path.join(broker.log_dirs[0], "alpha-0", "partition.metadata")
    with open(path, "wb") as fh:
        fh.write(b"\xff\xd8\xff garbage")
    broker.start()
    single_line_about(broker, "partition.metadata")
    assert_intact(broker, ids)
    from twisted_kafka.log.checkpoints import read_partition_metadata
    assert read_partition_metadata(path) == ids["alpha"]


# -- a flipped byte in an older segment --------------------------------------------------------


def recovery_point(broker, topic: str, partition: int) -> int:
    from twisted_kafka.log.checkpoints import read_offset_checkpoint
    try:
        points = read_offset_checkpoint(meta_path(broker, "recovery-point-offset-checkpoint"))
    except Exception:
        return -1
    return points.get((topic, partition), -1)


def fetch_at(broker, topic: str, partition: int, offset: int):
    with RawClient(broker.data_port) as client:
        response = client.request(fetch_request({topic: {partition: offset}}))
    (entry,) = response.responses[0].partitions
    return entry


def test_flipped_byte_below_the_recovery_point_is_reported_not_truncated(broker_factory):
    broker = broker_factory(OVERRIDES)
    create_topics(broker)
    produce_some(broker)
    segments = sorted(glob.glob(os.path.join(broker.log_dirs[0], "alpha-0", "*.log")))
    assert len(segments) >= 4
    second_base = int(os.path.basename(segments[1])[:20])
    # Finished segments are on disk and the recovery point says so soon after.
    wait_until(lambda: recovery_point(broker, "alpha", 0) >= second_base, timeout=10,
               what="the recovery point checkpoint to cover the finished segments")
    broker.kill()                                      # a crash: recovery runs at the next start

    data = bytearray(read_bytes(segments[0]))
    batches = list(iter_batch_headers(data))
    pos, damaged = batches[2]
    data[pos + damaged.size - 5] ^= 0x40               # inside the records: only the CRC notices
    with open(segments[0], "wb") as fh:
        fh.write(data)

    broker.start()
    line = broker.wait_for_log(r"#(warn|error)\].*" + os.path.basename(segments[0]), timeout=20)
    assert f"{damaged.base_offset}" in line
    assert "Traceback" not in broker.log_text(since_start=True)
    entry = fetch_at(broker, "alpha", 0, damaged.base_offset)
    assert entry.error_code == ErrorCode.CORRUPT_MESSAGE
    # Everything else is there: before the damaged batch, after it, in every later segment.
    wanted = [o for o, _ in expected()[("alpha", 0)] if not damaged.base_offset <= o <= damaged.last_offset]
    got = []
    offset = 0
    with RawClient(broker.data_port) as client:
        while offset < 4 * BATCHES:
            if damaged.base_offset <= offset <= damaged.last_offset:
                offset = damaged.last_offset + 1
                continue
            response = client.request(fetch_request({"alpha": {0: offset}}, partition_max_bytes=1024))
            (entry,) = response.responses[0].partitions
            assert entry.error_code == 0, (offset, entry.error_code)
            records = bytes(entry.records or b"")
            headers = [h for _, h in iter_batch_headers(records)]
            assert headers, offset
            for h in headers:
                got.extend(range(max(h.base_offset, offset), h.last_offset + 1))
            offset = headers[-1].last_offset + 1
    assert got == wanted
    others = contents(broker, skip={("alpha", 0)})
    assert others == {key: value for key, value in expected().items() if key != ("alpha", 0)}
    # Still reported after a clean restart; appends continue after the log end.
    broker.restart()
    assert fetch_at(broker, "alpha", 0, damaged.base_offset).error_code == ErrorCode.CORRUPT_MESSAGE
    with RawClient(broker.data_port) as client:
        response = client.request(produce_request({"alpha": {0: build_batch([(b"k", b"after")])}}))
        assert response.responses[0].partition_responses[0].base_offset == 4 * BATCHES
