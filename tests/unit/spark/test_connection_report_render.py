"""The connection report's driver side: times on the command line, the chart and the HTML page (no Spark)."""

from __future__ import annotations

import pytest

from twisted_kafka.spark.connection_report import chart_buckets, main, parse_time, render_chart, render_html

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
T0 = 1_795_490_880_000          # 2026-11-24 03:28 UTC, a minute's start


def test_times_are_iso_8601_in_utc_unless_said_otherwise_or_milliseconds():
    assert parse_time("2026-11-24T03:28") == T0
    assert parse_time("2026-11-24T03:28:00Z") == T0
    assert parse_time("2026-11-24T04:28:00+01:00") == T0
    assert parse_time(str(T0)) == T0
    assert parse_time(None) is None and parse_time(" ") is None
    with pytest.raises(ValueError, match="not a time"):
        parse_time("yesterday")


def test_the_chart_is_a_png_with_a_panel_per_listener(tmp_path):
    per_minute = [(T0, "PLAINTEXT", "accepted", 5), (T0, "PLAINTEXT", "rejected", 2),
                  (T0 + 60_000, "PLAINTEXT", "closed", 4), (T0, "CONTROLLER", "accepted", 1)]
    png = render_chart(per_minute, str(tmp_path / "c.png"))
    assert png.startswith(PNG_SIGNATURE) and png == (tmp_path / "c.png").read_bytes()
    empty = render_chart([], str(tmp_path / "e.png"))
    assert empty.startswith(PNG_SIGNATURE)


def test_the_page_has_totals_the_chart_inline_and_a_table_per_listener():
    groups = [("PLAINTEXT", "data", "127.0.0.2", "rejected", "max.connections.per.ip", 3, T0, T0 + 60_000),
              ("PLAINTEXT", "data", "127.0.0.1", "accepted", None, 7, T0, T0),
              ("CONTROLLER", "control", "127.0.0.1", "accepted", None, 1, T0, T0),
              ("PLAINTEXT", "data", "<script>", "closed", "a&b", 1, T0, T0)]
    page = render_html(groups, [(T0, "PLAINTEXT", "accepted", 7)], PNG_SIGNATURE + b"x", bootstrap="h:1",
                       since_ms=T0, until_ms=None, streaming=False)
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64,iVBORw0KGgp4" in page
    assert "<h2>Listener CONTROLLER" in page and "<h2>Listener PLAINTEXT" in page
    assert page.index("<h2>Listener CONTROLLER") < page.index("<h2>Listener PLAINTEXT")
    plaintext = page.split("<h2>Listener PLAINTEXT", 1)[1]
    assert plaintext.index("127.0.0.1") < plaintext.index("127.0.0.2"), "most events first"
    assert "<td>accepted</td><td class=\"n\">8</td>" in page          # totals per kind
    assert "since 2026-11-24 03:28 UTC" in page and "2026-11-24 03:29 UTC" in page
    assert "<script>" not in page and "&lt;script&gt;" in page and "a&amp;b" in page


def test_the_command_line_refuses_what_it_cannot_run(capsys):
    for argv, complaint in ((["--output", "o"], "--bootstrap-server"),
                            (["--bootstrap-server", "h:1", "--output", "o", "--streaming"], "--checkpoint"),
                            (["--bootstrap-server", "h:1", "--output", "o", "--checkpoint", "c"], "--streaming"),
                            (["--bootstrap-server", "h:1", "--output", "o", "--since", "soon"], "not a time"),
                            (["--bootstrap-server", "h:1", "--output", "o", "--option", "x"], "NAME=VALUE")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and complaint in capsys.readouterr().err


def test_the_chart_shows_quiet_minutes_as_zero_and_long_spans_per_hour():
    unit, series = chart_buckets([(T0, "P", "accepted", 2), (T0 + 3 * 60_000, "P", "accepted", 1),
                                  (T0 + 60_000, "P", "closed", 1)])
    assert unit == "minute"
    assert [n for _, n in series["P"]["accepted"]] == [2, 0, 0, 1]
    assert [n for _, n in series["P"]["closed"]] == [0, 1, 0, 0]
    assert series["P"]["accepted"][0][0].timestamp() * 1000 == T0
    unit, series = chart_buckets([(T0, "P", "accepted", 2), (T0 + 60_000, "P", "accepted", 3),
                                  (T0 + 4 * 86400_000, "P", "accepted", 1)])
    assert unit == "hour" and len(series["P"]["accepted"]) == 4 * 24 + 1
    assert series["P"]["accepted"][0][1] == 5 and sum(n for _, n in series["P"]["accepted"]) == 6
    assert chart_buckets([]) == ("minute", {})
