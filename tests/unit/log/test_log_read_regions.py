"""``Log.read(regions=True)``: the same batches as a read into memory, left in the file.

A zero-copy Fetch sends ``FileRegion``s with ``sendfile``; these tests hold
every region read against the bytes the ordinary read returns (offsets,
sizes, the high-watermark bound anywhere, reads across segments, the index
jump), and check that each region pins its segment's descriptor until it is
closed.
"""

from __future__ import annotations

import gc
import random

from twisted_kafka.protocol.records.file_region import FileRegion

from .helpers import NOW, batch, new_log


def region_bytes(info) -> bytes:
    out = []
    for chunk in info.records:
        assert isinstance(chunk, FileRegion)
        out.append(chunk.read())
        chunk.close()
    return b"".join(out)


def test_regions_hold_what_a_read_returns(tmp_path):
    rng = random.Random(11)
    log_ = new_log(tmp_path, segment_bytes=200_000, index_interval_bytes=4096)
    for _ in range(2500):
        log_.append_as_leader(batch(rng.choice([1, 1, 3, 20]), value_size=rng.choice([10, 100, 900])), 0, NOW)
    assert len(log_._segments) > 3
    end = log_.log_end_offset
    for _ in range(200):
        fetch_offset = rng.randrange(0, end)
        max_offset = rng.randrange(fetch_offset, end + 1)
        max_bytes = rng.choice([100, 5000, 40_000, 70_000, 1_048_576])
        min_one = rng.random() < 0.5
        plain = log_.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one)
        regions = log_.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one, regions=True)
        assert (regions.size, regions.first_offset, regions.next_offset) == (
            plain.size, plain.first_offset, plain.next_offset), (fetch_offset, max_bytes, max_offset)
        assert sum(len(c) for c in regions.records) == regions.size
        assert region_bytes(regions) == b"".join(bytes(c) for c in plain.records)


def test_a_region_pins_its_descriptor_until_closed(tmp_path):
    log_ = new_log(tmp_path)
    for _ in range(10):
        log_.append_as_leader(batch(5, value_size=100), 0, NOW)
    file = log_._segments[0].file
    pins = file.pins
    info = log_.read(0, 1_048_576, regions=True)
    [region] = info.records
    assert not region.closed and file.pins == pins + 1
    region.close()
    region.close()                           # once only
    assert region.closed and file.pins == pins
    again = log_.read(0, 1_048_576, regions=True)
    assert file.pins == pins + 1
    del again
    gc.collect()                             # a region dropped unsent unpins itself
    assert file.pins == pins


def test_a_deleted_segment_closes_once_its_last_region_is_closed(tmp_path):
    log_ = new_log(tmp_path)
    for _ in range(10):
        log_.append_as_leader(batch(5, value_size=100), 0, NOW)
    segment = log_._segments[0]
    [region] = log_.read(0, 1_048_576, regions=True).records
    expected = region.read()
    segment.file.close()                     # as deleting the segment does
    assert segment.file.fd is not None       # still pinned by the region: readable
    assert region.read() == expected
    region.close()
    assert segment.file.fd is None
