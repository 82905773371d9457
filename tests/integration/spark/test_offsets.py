"""The offset arithmetic and option rules of the Spark data source (plain functions: no broker, no Spark)."""

from __future__ import annotations

import pytest

from twisted_kafka.spark.offsets import (
    DataLossError,
    OffsetRange,
    from_json,
    plan_ranges,
    rate_limit,
    resolve,
    split_ranges,
    to_json,
)
from twisted_kafka.spark.options import OptionError, parse_sink_options, parse_source_options

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_offset_json_is_sparks_and_sorted():
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 1}
    assert to_json(offsets) == {"a": {"0": 1}, "b": {"2": 7, "10": 5}}
    assert list(to_json(offsets)["b"]) == ["2", "10"]
    assert from_json(to_json(offsets)) == offsets


def test_resolve_specific_offsets_needs_every_partition():
    tps = [("t", 0), ("t", 1)]
    earliest, latest = {("t", 0): 3, ("t", 1): 4}, {("t", 0): 30, ("t", 1): 40}
    assert resolve({("t", 0): -2, ("t", 1): -1}, tps, earliest, latest, name="x") == {("t", 0): 3, ("t", 1): 40}
    assert resolve("earliest", tps, earliest, latest, name="x") == earliest
    with pytest.raises(ValueError, match="partitions without an offset: t-1"):
        resolve({("t", 0): 5}, tps, earliest, latest, name="startingOffsets")


def test_rate_limit_shares_the_limit_in_proportion_to_the_backlog():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 7}
    assert rate_limit(start, latest, 100) == {("t", 0): 75, ("t", 1): 125, ("t", 2): 7}
    assert rate_limit(start, latest, 10_000) == latest
    # A share below one record is rounded up: no partition starves.
    assert rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 10) == {("t", 0): 9, ("t", 1): 1}


def test_split_ranges_reaches_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    pieces = split_ranges(ranges, 10)
    assert len(pieces) == 10
    for p in (0, 1):
        mine = [r for r in pieces if r.partition == p]
        assert mine[0].start == ranges[p].start and mine[-1].end == ranges[p].end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:], strict=False))
        assert max(r.size for r in mine) - min(r.size for r in mine) <= 1
    assert len(split_ranges([OffsetRange("t", 0, 0, 3)], 10)) == 3  # never a piece below one record


def test_plan_ranges_reports_data_loss():
    start = {("t", 0): 10, ("t", 1): 10, ("gone", 0): 4}
    end = {("t", 0): 50, ("t", 1): 50, ("new", 0): 8}
    earliest = {("t", 0): 20, ("t", 1): 0, ("new", 0): 2}
    with pytest.raises(DataLossError) as failure:
        plan_ranges(start, end, earliest, fail_on_data_loss=True, warn=print)
    message = str(failure.value)
    assert "offsets 10 to 19 of t-0" in message and "gone-0 is gone" in message
    assert "offsets 0 to 1 of new-0 (a partition added" in message and "failOnDataLoss" in message
    warnings = []
    ranges = plan_ranges(start, end, earliest, fail_on_data_loss=False, warn=warnings.append)
    assert ranges == [OffsetRange("new", 0, 2, 8), OffsetRange("t", 0, 20, 50), OffsetRange("t", 1, 10, 50)]
    assert len(warnings) == 3


def test_source_options_follow_sparks_rules():
    options = parse_source_options({**BOOTSTRAP, "subscribePattern": "ev.*", "maxOffsetsPerTrigger": "5",
                                    "kafka.fetch.wait.max.ms": "10"}, streaming=True)
    assert options.starting == "latest" and options.ending is None and options.fail_on_data_loss
    assert options.client == {"bootstrap.servers": "127.0.0.1:9092", "fetch.wait.max.ms": "10",
                              "isolation.level": "read_uncommitted"}       # Spark's default, not librdkafka's
    committed = parse_source_options({**BOOTSTRAP, "subscribe": "a", "kafka.isolation.level": "READ_COMMITTED"},
                                     streaming=False)
    assert committed.client["isolation.level"] == "read_committed"
    assert parse_source_options({**BOOTSTRAP, "subscribe": "a"}, streaming=False).ending == "latest"
    refused = [
        ({"subscribe": "a"}, True, "kafka.bootstrap.servers"),
        ({**BOOTSTRAP}, True, "Exactly one of"),
        ({**BOOTSTRAP, "subscribe": "a", "endingOffsets": "latest"}, True, "not valid in streaming"),
        ({**BOOTSTRAP, "subscribe": "a", "startingOffsets": "latest"}, False, "must not be 'latest'"),
        ({**BOOTSTRAP, "subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, False, "-1"),
        ({**BOOTSTRAP, "subscribe": "a", "startingOffsets": '{"b": {"0": 1}}'}, False, "does not read: b-0"),
        ({**BOOTSTRAP, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, True, "startingOffsets"),
        ({**BOOTSTRAP, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
        ({**BOOTSTRAP, "subscribe": "a", "startingTimestamp": "1"}, True, "not supported"),
        ({**BOOTSTRAP, "assign": "[0]"}, True, "assign"),
        ({**BOOTSTRAP, "subscribe": "a", "kafka.isolation.level": "snapshot"}, False, "read_uncommitted or"),
    ]
    for given, streaming, match in refused:
        with pytest.raises(OptionError, match=match):
            parse_source_options(given, streaming=streaming)


def test_sink_options():
    assert parse_sink_options({**BOOTSTRAP, "topic": "out"}).topic == "out"
    assert parse_sink_options(BOOTSTRAP).topic is None
    with pytest.raises(OptionError, match="'transactional.id' is not supported by the sink"):
        parse_sink_options({**BOOTSTRAP, "kafka.transactional.id": "t"})
