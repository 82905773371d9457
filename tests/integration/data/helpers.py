"""Helpers for the data-path integration tests: checksums, stored-batch inspection, raw requests.

The tests drive a real broker process with real clients; these helpers only
look at what the clients and the broker did:

* ``Tally`` — a running checksum per partition over (key, value) in order,
  so 100k messages are compared without keeping them;
* ``stored_batches(broker, topic)`` — the batch headers in the partition's
  segment files, read straight from disk (which codec was *stored*, whatever
  the client was configured with: librdkafka and kafka-python send a batch
  uncompressed when compressing does not make it smaller);
* ``produce_request``/``fetch_request``/... — request messages for the raw
  socket tests (``support.raw_client.RawClient``).
"""

from __future__ import annotations

import glob
import hashlib
import os
import struct
from collections import Counter

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.records.batch import iter_batch_headers
from twisted_kafka.protocol.records.compression import CompressionType

__all__ = ["Tally", "stored_batches", "stored_codecs", "partition_dir", "segment_files", "produce_request",
           "fetch_request", "list_offsets_request", "assert_stored_codec", "CODECS"]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_LEN = struct.Struct(">i")


class Tally:
    """Running checksum and count of (key, value) pairs, one per partition, in order."""

    def __init__(self):
        self._hashes: dict[int, hashlib._Hash] = {}
        self.counts: Counter = Counter()

    def add(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        h = self._hashes.get(partition)
        if h is None:
            h = self._hashes[partition] = hashlib.blake2b(digest_size=16)
        for part in (key, value):
            if part is None:
                h.update(b"\xff\xff\xff\xff")
            else:
                h.update(_LEN.pack(len(part)))
                h.update(part)
        self.counts[partition] += 1

    def digests(self) -> dict[int, tuple[int, str]]:
        return {p: (self.counts[p], h.hexdigest()) for p, h in sorted(self._hashes.items())}

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def partition_dir(broker, topic: str, partition: int) -> str:
    return os.path.join(broker.log_dirs[0], f"{topic}-{partition}")


def segment_files(broker, topic: str, partition: int) -> list[str]:
    return sorted(glob.glob(os.path.join(partition_dir(broker, topic, partition), "*.log")))


def stored_batches(broker, topic: str, partition: int | None = None) -> list:
    """(partition, position, header) of every batch in the topic's segment files on disk."""
    found = []
    partitions = [partition] if partition is not None else sorted(
        int(os.path.basename(d).rsplit("-", 1)[1])
        for d in glob.glob(os.path.join(broker.log_dirs[0], f"{topic}-*")) if os.path.isdir(d)
        and os.path.basename(d).rsplit("-", 1)[1].isdigit())
    for p in partitions:
        for path in segment_files(broker, topic, p):
            with open(path, "rb") as fh:
                data = fh.read()
            for pos, header in iter_batch_headers(data, allow_partial_tail=True):
                found.append((p, pos, header))
    return found


def stored_codecs(broker, topic: str) -> Counter:
    """How many stored batches use each codec (by name: none, gzip, ...)."""
    return Counter(CompressionType(h.attributes & 0x07).name.lower() for _, _, h in stored_batches(broker, topic))


def assert_stored_codec(stored: Counter, codec: str) -> None:
    """The batches are stored with ``codec``, apart from ones the client sent uncompressed
    because compressing did not make them smaller (librdkafka and kafka-python do
    that, in src/rdkafka_msgset_writer.c and kafka/record/default_records.py; it
    happens to a short last batch)."""
    assert stored[codec] >= 1, f"no {codec} batch stored: {dict(stored)}"
    assert set(stored) <= {codec, "none"}, dict(stored)
    if codec != "none":
        assert stored[codec] > stored["none"], f"mostly uncompressed batches stored: {dict(stored)}"


def produce_request(topics: dict[str, dict[int, bytes | None]], *, acks: int = -1, version: int = 7,
                    timeout_ms: int = 5000):
    R = m.ProduceRequest
    return R(version=version, transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        R.TopicProduceData(name=name, partition_data=[
            R.TopicProduceData.PartitionProduceData(index=index, records=records)
            for index, records in parts.items()])
        for name, parts in topics.items()])


def fetch_request(topics: dict[str, dict[int, int]], *, version: int = 11, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 50 * 1024 * 1024, partition_max_bytes: int = 1024 * 1024,
                  isolation_level: int = 0, current_leader_epoch: int = -1):
    F = m.FetchRequest
    return F(version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
             isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=[
                 F.FetchTopic(topic=name, partitions=[
                     F.FetchTopic.FetchPartition(partition=index, current_leader_epoch=current_leader_epoch,
                                                 fetch_offset=offset, log_start_offset=-1,
                                                 partition_max_bytes=partition_max_bytes)
                     for index, offset in parts.items()])
                 for name, parts in topics.items()], forgotten_topics_data=[], rack_id="")


def list_offsets_request(topics: dict[str, dict[int, int]], *, version: int = 7, isolation_level: int = 0):
    L = m.ListOffsetsRequest
    return L(version=version, replica_id=-1, isolation_level=isolation_level, topics=[
        L.ListOffsetsTopic(name=name, partitions=[
            L.ListOffsetsTopic.ListOffsetsPartition(partition_index=index, current_leader_epoch=-1,
                                                    timestamp=timestamp, max_num_offsets=1)
            for index, timestamp in parts.items()])
        for name, parts in topics.items()])
