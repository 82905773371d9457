"""The connection report: ``__connection_events`` counted per minute, as Parquet, a PNG chart and an HTML page.

    bin/twisted-kafka-connection-report --bootstrap-server HOST:PORT --output DIR
        [--since TIME] [--until TIME] [--streaming --checkpoint DIR]
        [--option NAME=VALUE ...] [--master MASTER]

A PySpark job over the ``twisted_kafka`` data source.  It reads the records
the brokers write to ``__connection_events`` (``connection.events.enable``;
the layout is in ``twisted_kafka/server/connection_event_log.py``), parses
their JSON values, and counts the events per minute × broker × listener ×
plane × client IP × kind × reason.  Into ``DIR`` it writes:

* ``connection_counts/`` -- Parquet, one row per group: ``minute``
  (timestamp, the minute's start, UTC), ``broker`` (int), ``listener``,
  ``plane``, ``ip``, ``kind`` (accepted, rejected, authentication_failed,
  closed), ``reason`` (string, null for acceptances), ``count`` (long);
  replaced at every run;
* ``connection_report.png`` -- events per minute and kind, one panel per
  listener (matplotlib, Agg; per hour beyond 3 days, per day beyond 90);
* ``connection_report.html`` -- a self-contained page: totals, the chart
  (embedded), and a table per listener of its client IPs × kinds × reasons.

Batch (the default) reads the whole topic, from its earliest offset to its
latest, and keeps the events with ``since <= timestamp < until``.  With
``--streaming --checkpoint CKPT`` it runs a stream with Trigger.AvailableNow:
each run reads only what arrived since the previous one (the offsets are in
``CKPT``), writes that run's counts under ``DIR/increments/`` (one directory
per micro-batch, rewritten if Spark runs the batch again), and the report
sums every increment; ``--since/--until`` then select whole minutes.  The
increments and the checkpoint belong together: delete both or neither.
Events removed by retention before a stream read them are skipped
(``failOnDataLoss=false``): the history is what the topic still holds.

Times are ISO 8601 (``2026-11-24T03:00``, UTC unless an offset is given) or
milliseconds since the epoch.
"""

from __future__ import annotations

import argparse
import base64
import html
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["CONNECTION_EVENTS_TOPIC", "ConnectionReport", "main", "parse_time", "run"]

CONNECTION_EVENTS_TOPIC = "__connection_events"
COUNTS_DIR = "connection_counts"
INCREMENTS_DIR = "increments"
PNG_NAME = "connection_report.png"
HTML_NAME = "connection_report.html"
#: The columns a group is made of (``minute`` first), then ``count``.
GROUP_COLUMNS = ("minute", "broker", "listener", "plane", "ip", "kind", "reason")
KINDS = ("accepted", "rejected", "authentication_failed", "closed")
#: Rows of a listener's table in the HTML page (the Parquet has them all).
TABLE_ROWS = 500

_KIND_COLORS = {"accepted": "#2b8a3e", "rejected": "#e8590c", "authentication_failed": "#c2255c",
                "closed": "#1971c2"}


@dataclass
class ConnectionReport:
    """What a run wrote, and the totals per (listener, ip, kind, reason) over the period."""

    counts_path: str
    png_path: str
    html_path: str
    totals: dict[tuple[str, str, str, str | None], int] = field(default_factory=dict)
    first_minute_ms: int | None = None
    last_minute_ms: int | None = None

    @property
    def events(self) -> int:
        return sum(self.totals.values())


def parse_time(text: str | None) -> int | None:
    """Milliseconds since the epoch from ISO 8601 (UTC unless it says otherwise) or from milliseconds."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not a time: {text!r} (ISO 8601, e.g. 2026-11-24T03:00, or milliseconds)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


# -- Spark ---------------------------------------------------------------------------------------

def _event_schema():
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    return StructType([
        StructField("version", IntegerType()), StructField("kind", StringType()),
        StructField("timestamp", LongType()), StructField("broker", IntegerType()),
        StructField("listener", StringType()), StructField("plane", StringType()),
        StructField("ip", StringType()), StructField("port", IntegerType()),
        StructField("connection_id", StringType()), StructField("principal", StringType()),
        StructField("reason", StringType()),
    ])


def _counts_schema():
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

    return StructType([
        StructField("minute", TimestampType()), StructField("broker", IntegerType()),
        StructField("listener", StringType()), StructField("plane", StringType()),
        StructField("ip", StringType()), StructField("kind", StringType()),
        StructField("reason", StringType()), StructField("count", LongType()),
    ])


def parse_events(raw):
    """The records of ``__connection_events`` (the data source's rows) as typed events; others are left out."""
    from pyspark.sql import functions as F

    event = F.from_json(F.col("value").cast("string"), _event_schema())
    return (raw.select(event.alias("e")).select("e.*")
            .where(F.col("kind").isNotNull() & F.col("timestamp").isNotNull()))


def count_per_minute(events):
    """Events counted per minute × broker × listener × plane × ip × kind × reason."""
    from pyspark.sql import functions as F

    minute = F.expr("timestamp_millis(timestamp - pmod(timestamp, 60000))")
    return (events.withColumn("minute", minute).groupBy(*GROUP_COLUMNS)
            .agg(F.count(F.lit(1)).alias("count")))


def _source_options(bootstrap: str, options: Mapping[str, str]) -> dict[str, str]:
    merged = {"kafka.bootstrap.servers": bootstrap, "subscribe": CONNECTION_EVENTS_TOPIC}
    merged.update(options)
    return merged


def _batch_counts(spark, bootstrap: str, options: Mapping[str, str], since_ms: int | None, until_ms: int | None):
    from pyspark.sql import functions as F

    from . import FORMAT

    reader = spark.read.format(FORMAT)
    for name, value in _source_options(bootstrap, options).items():
        reader = reader.option(name, value)
    events = parse_events(reader.load())
    if since_ms is not None:
        events = events.where(F.col("timestamp") >= since_ms)
    if until_ms is not None:
        events = events.where(F.col("timestamp") < until_ms)
    return count_per_minute(events)


def _streaming_counts(spark, bootstrap: str, options: Mapping[str, str], output: Path, checkpoint: str,
                      since_ms: int | None, until_ms: int | None):
    """Read what is new since the checkpoint into increments; the sum of every increment."""
    from pyspark.sql import functions as F

    from . import FORMAT

    increments = output / INCREMENTS_DIR
    reader = spark.readStream.format(FORMAT).option("startingOffsets", "earliest").option("failOnDataLoss", "false")
    for name, value in _source_options(bootstrap, options).items():
        reader = reader.option(name, value)

    def write_increment(df, batch_id: int) -> None:
        # Overwriting the batch's own directory: a batch Spark runs again replaces what it wrote.
        (count_per_minute(parse_events(df)).coalesce(1).write.mode("overwrite")
         .parquet(str(increments / f"batch_id={batch_id}")))

    query = (reader.load().writeStream.foreachBatch(write_increment).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if not increments.exists():
        return spark.createDataFrame([], _counts_schema())
    counts = (spark.read.schema(_counts_schema()).parquet(str(increments)).groupBy(*GROUP_COLUMNS)
              .agg(F.sum("count").cast("long").alias("count")))
    if since_ms is not None:
        counts = counts.where(F.expr("unix_millis(minute)") >= since_ms - since_ms % 60000)
    if until_ms is not None:
        counts = counts.where(F.expr("unix_millis(minute)") < until_ms)
    return counts


def run(spark, *, bootstrap: str, output: str | os.PathLike, since: str | int | None = None,
        until: str | int | None = None, streaming: bool = False, checkpoint: str | None = None,
        options: Mapping[str, str] | None = None) -> ConnectionReport:
    """Count the connection events and write the Parquet, the PNG and the HTML under ``output``.

    ``spark`` must have the ``twisted_kafka`` data source registered (``twisted_kafka.spark.register``);
    ``options`` are more source options (``kafka.security.protocol``, ...).
    """
    from pyspark.sql import functions as F

    since_ms = since if isinstance(since, int) else parse_time(since)
    until_ms = until if isinstance(until, int) else parse_time(until)
    if streaming and not checkpoint:
        raise ValueError("a streaming report needs a checkpoint directory")
    out = Path(output).resolve()
    out.mkdir(parents=True, exist_ok=True)
    options = dict(options or {})
    if streaming:
        assert checkpoint is not None
        counts = _streaming_counts(spark, bootstrap, options, out, checkpoint, since_ms, until_ms)
    else:
        counts = _batch_counts(spark, bootstrap, options, since_ms, until_ms)

    counts_path = out / COUNTS_DIR
    # Cached: the topic is read once, for the Parquet and for the two summaries the chart and page need.
    counts = counts.select(*GROUP_COLUMNS, "count").coalesce(1).cache()
    try:
        counts.write.mode("overwrite").parquet(str(counts_path))
        per_minute = [(r.minute_ms, r.listener, r.kind, r.n) for r in
                      counts.groupBy(F.expr("unix_millis(minute)").alias("minute_ms"), "listener", "kind")
                      .agg(F.sum("count").alias("n")).orderBy("minute_ms").collect()]
        groups = [(r.listener, r.plane, r.ip, r.kind, r.reason, r.n, r.first_ms, r.last_ms) for r in
                  counts.groupBy("listener", "plane", "ip", "kind", "reason")
                  .agg(F.sum("count").alias("n"), F.expr("min(unix_millis(minute))").alias("first_ms"),
                       F.expr("max(unix_millis(minute))").alias("last_ms")).collect()]
    finally:
        counts.unpersist()

    report = ConnectionReport(counts_path=str(counts_path), png_path=str(out / PNG_NAME),
                              html_path=str(out / HTML_NAME))
    for listener, _plane, ip, kind, reason, n, _first, _last in groups:
        report.totals[(listener, ip, kind, reason)] = int(n)
    minutes = [m for m, *_ in per_minute]
    report.first_minute_ms = min(minutes) if minutes else None
    report.last_minute_ms = max(minutes) if minutes else None
    png = render_chart(per_minute, report.png_path)
    Path(report.html_path).write_text(render_html(groups, per_minute, png, bootstrap=bootstrap, since_ms=since_ms,
                                                  until_ms=until_ms, streaming=streaming), encoding="utf-8")
    return report


# -- rendering (driver side, plain Python) ----------------------------------------------------------

def _utc(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


#: The chart's bucket for a span of time: minutes up to 3 days, hours up to 90 days, days beyond.
_BUCKETS = ((3 * 86400_000, 60_000, "minute"), (90 * 86400_000, 3600_000, "hour"), (None, 86400_000, "day"))


def chart_buckets(per_minute: Iterable[tuple[int, str, str, int]]) -> tuple[str, dict[str, dict[str, list]]]:
    """The counts per listener and kind in buckets of the span's size, every bucket of the span present
    (zero when nothing happened, so a line never bridges a quiet period)."""
    rows = list(per_minute)
    if not rows:
        return "minute", {}
    first = min(m for m, *_ in rows)
    last = max(m for m, *_ in rows)
    size, unit = next((size, unit) for limit, size, unit in _BUCKETS if limit is None or last - first <= limit)
    start = first - first % size
    count = (last - start) // size + 1
    series: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(lambda: [0] * count))
    for minute_ms, listener, kind, n in rows:
        series[listener][kind][(minute_ms - start) // size] += int(n)
    times = [datetime.fromtimestamp((start + i * size) / 1000, UTC) for i in range(count)]
    return unit, {listener: {kind: list(zip(times, values, strict=True)) for kind, values in kinds.items()}
                  for listener, kinds in series.items()}


def render_chart(per_minute: Iterable[tuple[int, str, str, int]], path: str) -> bytes:
    """Events per minute (hour, day, for long spans) and kind, one panel per listener; written to ``path``
    as PNG, and returned."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    unit, series = chart_buckets(per_minute)
    listeners = sorted(series)
    fig = Figure(figsize=(10, 2.6 * max(1, len(listeners)) + 0.6), dpi=100, layout="constrained")
    if not listeners:
        ax = fig.subplots()
        ax.text(0.5, 0.5, f"No connection events in {CONNECTION_EVENTS_TOPIC}", ha="center", va="center")
        ax.set_axis_off()
    else:
        axes = fig.subplots(len(listeners), 1, sharex=True, squeeze=False)[:, 0]
        for ax, listener in zip(axes, listeners, strict=True):
            kinds = series[listener]
            for kind in [k for k in KINDS if k in kinds] + sorted(set(kinds) - set(KINDS)):
                points = kinds[kind]
                ax.plot([t for t, _ in points], [n for _, n in points], marker="o" if len(points) <= 120 else None,
                        markersize=3, linewidth=1.2, label=kind, color=_KIND_COLORS.get(kind))
            ax.set_title(f"listener {listener}", loc="left", fontsize=10)
            ax.set_ylabel(f"events / {unit}")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="upper right", fontsize=8)
        locator = AutoDateLocator()
        axes[-1].xaxis.set_major_locator(locator)
        axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator))
        axes[-1].set_xlabel(f"{unit} (UTC)")
    fig.suptitle(f"Connection events ({CONNECTION_EVENTS_TOPIC})")
    fig.savefig(path, format="png")
    return Path(path).read_bytes()


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #212529; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #dee2e6; padding: 0.25em 0.6em; text-align: left; }
th { background: #f1f3f5; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #dee2e6; }
.muted { color: #868e96; }
"""


def render_html(groups: Sequence[tuple], per_minute: Sequence[tuple[int, str, str, int]], png: bytes, *,
                bootstrap: str, since_ms: int | None, until_ms: int | None, streaming: bool) -> str:
    """The report page: totals per kind, the chart inline, a table per listener (``TABLE_ROWS`` rows at most)."""
    e = html.escape
    totals: dict[str, int] = defaultdict(int)
    for _listener, _plane, _ip, kind, _reason, n, _first, _last in groups:
        totals[kind] += int(n)
    minutes = [m for m, *_ in per_minute]
    period = (f"{_utc(min(minutes))} to {_utc(max(minutes))}" if minutes else "no events")
    asked = []
    if since_ms is not None:
        asked.append(f"since {_utc(since_ms)}")
    if until_ms is not None:
        asked.append(f"until {_utc(until_ms)}")
    parts = [
        "<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<title>Connection report</title>", f"<style>{_STYLE}</style></head><body>",
        "<h1>Connection report</h1>",
        f"<p>Topic <code>{e(CONNECTION_EVENTS_TOPIC)}</code> at <code>{e(bootstrap)}</code>, "
        f"{'streaming (incremental)' if streaming else 'batch'} read"
        f"{' (' + e(', '.join(asked)) + ')' if asked else ''}; minutes with events: {e(period)}; "
        f"generated {e(_utc(int(datetime.now(UTC).timestamp() * 1000)))}.</p>",
        "<table><tr><th>kind</th><th>events</th></tr>",
    ]
    for kind in [k for k in KINDS if k in totals] + sorted(set(totals) - set(KINDS)):
        parts.append(f"<tr><td>{e(kind)}</td><td class=\"n\">{totals[kind]}</td></tr>")
    parts.append("</table>")
    parts.append(f"<img alt=\"Connection events per minute\" src=\"data:image/png;base64,"
                 f"{base64.b64encode(png).decode('ascii')}\">")
    by_listener: dict[str, list[tuple]] = defaultdict(list)
    planes: dict[str, str] = {}
    for listener, plane, ip, kind, reason, n, first, last in groups:
        by_listener[listener].append((ip, kind, reason, int(n), first, last))
        planes[listener] = plane
    for listener in sorted(by_listener):
        rows = sorted(by_listener[listener], key=lambda r: (-r[3], r[0], r[1], r[2] or ""))
        parts.append(f"<h2>Listener {e(listener)} <span class=\"muted\">({e(planes[listener])} plane)</span></h2>")
        parts.append("<table><tr><th>client IP</th><th>kind</th><th>reason</th><th>events</th>"
                     "<th>first minute</th><th>last minute</th></tr>")
        for ip, kind, reason, n, first, last in rows[:TABLE_ROWS]:
            parts.append(f"<tr><td>{e(ip)}</td><td>{e(kind)}</td><td>{e(reason or '')}</td>"
                         f"<td class=\"n\">{n}</td><td>{e(_utc(first))}</td><td>{e(_utc(last))}</td></tr>")
        parts.append("</table>")
        if len(rows) > TABLE_ROWS:
            parts.append(f"<p class=\"muted\">{len(rows) - TABLE_ROWS} more rows in the Parquet "
                         f"({e(COUNTS_DIR)}/).</p>")
    if not by_listener:
        parts.append(f"<p>No connection events in <code>{e(CONNECTION_EVENTS_TOPIC)}</code>.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# -- command line --------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="twisted-kafka-connection-report",
        description=f"Count the brokers' connection events ({CONNECTION_EVENTS_TOPIC}) per minute, listener, "
                    "client IP, kind and reason with Spark; write Parquet, a PNG chart and an HTML report.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]",
                        help="brokers to bootstrap from")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help=f"local directory for {COUNTS_DIR}/ (Parquet), {PNG_NAME} and {HTML_NAME}")
    parser.add_argument("--since", metavar="TIME", help="first time counted (ISO 8601, UTC by default, or ms)")
    parser.add_argument("--until", metavar="TIME", help="end of the period, excluded (ISO 8601 or ms)")
    parser.add_argument("--streaming", action="store_true",
                        help="read only what is new since the last run (Trigger.AvailableNow), adding to "
                             f"the counts under DIR/{INCREMENTS_DIR}/")
    parser.add_argument("--checkpoint", metavar="DIR", help="the stream's checkpoint (with --streaming)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a source option, e.g. kafka.security.protocol=SSL (repeatable)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.streaming and not args.checkpoint:
        parser.error("--streaming needs --checkpoint DIR")
    if args.checkpoint and not args.streaming:
        parser.error("--checkpoint is for --streaming")
    options: dict[str, Any] = {}
    for item in args.option:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--option takes NAME=VALUE, not {item!r}")
        options[name] = value
    try:
        since, until = parse_time(args.since), parse_time(args.until)
    except ValueError as exc:
        parser.error(str(exc))

    # Spark's Python workers run this interpreter (which can import twisted_kafka) unless told otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from . import register

    builder = SparkSession.builder.appName("twisted-kafka-connection-report")
    if args.master:
        builder = builder.master(args.master)
    spark = (builder.config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    try:
        spark.sparkContext.setLogLevel("WARN")
        register(spark)
        report = run(spark, bootstrap=args.bootstrap_server, output=args.output, since=since, until=until,
                     streaming=args.streaming, checkpoint=args.checkpoint, options=options)
    finally:
        spark.stop()
    print(f"{report.events} connection event(s), minutes {_utc(report.first_minute_ms)} to "
          f"{_utc(report.last_minute_ms)}")
    print(f"Parquet: {report.counts_path}")
    print(f"Chart:   {report.png_path}")
    print(f"Report:  {report.html_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
