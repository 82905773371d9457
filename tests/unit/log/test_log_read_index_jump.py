"""``Log.read`` finds the end of its last whole batch through the offset index.

Reads over many small batches jump to the last indexed batch inside the data
instead of walking every header.  These tests compare every read with the
plain walk (every batch, in order) over logs of small and mixed batches,
with the high-watermark-style ``max_offset`` landing anywhere.
"""

from __future__ import annotations

import random

from twisted_kafka.log import log as log_module
from twisted_kafka.log.batches import whole_batches

from .helpers import NOW, batch, headers_of, new_log, records_of


def reference_read(log_, fetch_offset: int, max_bytes: int, max_offset: int):
    """What a read must return: whole batches from the one holding fetch_offset, each ending
    below max_offset, up to max_bytes (at least one batch), by walking every header."""
    data = b"".join(bytes(s.read(0, s.size)) for s in log_._segments)
    out, total = [], 0
    for span in whole_batches(data):
        if span.last_offset < fetch_offset:
            continue
        if span.last_offset >= max_offset:
            break
        if total + span.size > max_bytes and out:
            break
        out.append(data[span.position:span.position + span.size])
        total += span.size
        if total >= max_bytes:
            break
    return b"".join(out)


def test_reads_over_small_batches_match_a_full_walk(tmp_path):
    rng = random.Random(7)
    log_ = new_log(tmp_path, segment_bytes=300_000, index_interval_bytes=4096)
    for _ in range(4000):
        size = rng.choice([1, 1, 1, 2, 5, 40])
        log_.append_as_leader(batch(size, value_size=rng.choice([10, 100, 300])), 0, NOW)
    assert len(log_._segments) > 3
    end = log_.log_end_offset
    for _ in range(300):
        fetch_offset = rng.randrange(0, end)
        max_offset = rng.randrange(fetch_offset, end + 1)
        max_bytes = rng.choice([100, 5000, 40_000, 70_000, 1_048_576])
        info = log_.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_message=False)
        got = b"".join(bytes(c) for c in info.records)
        expected = reference_read(log_, fetch_offset, max_bytes, max_offset)
        if len(expected) > max_bytes:
            # Only a first batch larger than max_bytes: nothing without min_one_message.
            assert got == b"", (fetch_offset, max_bytes, max_offset)
            continue
        assert got == expected, (fetch_offset, max_bytes, max_offset)
        if got:
            last = headers_of(info)[-1]
            assert info.next_offset == last.last_offset + 1
            assert last.last_offset < max_offset


def test_the_jump_is_used_and_agrees_with_the_walk(tmp_path, monkeypatch):
    log_ = new_log(tmp_path, index_interval_bytes=4096)
    for _ in range(3000):
        log_.append_as_leader(batch(1, value_size=100), 0, NOW)
    end = log_.log_end_offset
    cases = [(0, 1_048_576, end), (10, 200_000, end), (100, 1_048_576, 2500), (7, 60_000, 1234)]
    jumped = [log_.read(f, b, max_offset=m) for f, b, m in cases]
    monkeypatch.setattr(log_module, "INDEX_JUMP_MIN_BYTES", 1 << 40)     # never jump
    walked = [log_.read(f, b, max_offset=m) for f, b, m in cases]
    for a, b in zip(jumped, walked, strict=True):
        assert (a.size, a.first_offset, a.next_offset) == (b.size, b.first_offset, b.next_offset)
        assert records_of(a) == records_of(b)
    assert jumped[2].next_offset == 2500 and records_of(jumped[2])[-1][0] == 2499
    batch_size = len(batch(1, value_size=100))
    assert jumped[3].size == 60_000 // batch_size * batch_size       # cut by max_bytes
