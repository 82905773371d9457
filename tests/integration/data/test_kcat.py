"""kcat (Debian's 1.7.1 on librdkafka 2.0.2): ``-P`` then ``-C``, with every codec.

``kcat -P -K:`` reads ``key:value`` lines and auto-creates the topic (a
librdkafka producer's Metadata request allows it); ``kcat -C -o beginning -e``
reads every partition to its end and exits.  The consumer prints partition
and offset too, so the test checks that each partition's offsets run 0..n-1
and that each partition holds its keys in the order they were produced.

librdkafka before 2.11.1 sends gzip, snappy and lz4 batches uncompressed
unless Produce v0 is inside the advertised range (src/rdkafka_msgset_writer.c),
and like 2.16 ties lz4 to FindCoordinator, which the broker advertises (consumer
groups): every codec is stored as asked, read back from the segment files.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict

import pytest

from .helpers import CODECS, assert_stored_codec, stored_codecs
from .test_confluent_roundtrip import FIND_COORDINATOR, advertised_keys

BROKER_OVERRIDES = {"num.partitions": "3"}
N = 5000


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    result = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=timeout)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]!r}"
    return result


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(data_broker, codec):
    topic = f"kcat-{codec}"
    lines = [f"key{i:05d}:value-{i}-{'z' * (i % 50)}" for i in range(N)]
    # linger.ms: batches of many records whatever the machine's load, so compressing them pays
    # and librdkafka keeps the codec (it sends a batch uncompressed when that is smaller).
    kcat("-P", "-b", data_broker.bootstrap, "-t", topic, "-K:", "-z", codec, "-X", "linger.ms=50",
         stdin=("\n".join(lines) + "\n").encode())

    out = kcat("-C", "-b", data_broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
               "-f", r"%p %o %k:%s\n").stdout.decode()
    by_partition: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for line in out.splitlines():
        partition, offset, rest = line.split(" ", 2)
        by_partition[int(partition)].append((int(offset), rest))
    assert sum(len(v) for v in by_partition.values()) == N
    received = set()
    for partition, entries in by_partition.items():
        assert [o for o, _ in entries] == list(range(len(entries))), f"offsets of partition {partition}"
        keys = [rest.split(":", 1)[0] for _, rest in entries]
        assert keys == sorted(keys), f"partition {partition} is not in produce order"
        received.update(rest for _, rest in entries)
    assert received == set(lines)

    stored = stored_codecs(data_broker, topic)
    if codec == "lz4":
        assert FIND_COORDINATOR in advertised_keys(data_broker)     # librdkafka's LZ4 feature is on
    assert_stored_codec(stored, codec)
