"""``log.format=json``: one JSON object per line, with a readable message and the event's fields."""

from __future__ import annotations

import io
import json

from twisted.logger import Logger

from twisted_kafka.logging import json_file_observer, json_line


def test_an_event_is_one_json_line_with_timestamp_level_logger_message_and_fields():
    out = io.StringIO()
    log = Logger(namespace="kafka.request.logger", observer=json_file_observer(out))
    log.debug("Completed request: api={api}, total_time_ms={total_time_ms}", api="Metadata", total_time_ms=0.412,
              client_id=None, tags=["a", 1], source_object=object(), nan=float("nan"))
    log.info("second")
    first, second = out.getvalue().splitlines()
    record = json.loads(first)
    assert record.pop("timestamp").endswith("Z")
    assert record == {"level": "DEBUG", "logger": "kafka.request.logger",
                      "message": "Completed request: api=Metadata, total_time_ms=0.412",
                      "api": "Metadata", "total_time_ms": 0.412, "client_id": None, "tags": ["a", 1]}
    assert json.loads(second)["message"] == "second"


def test_the_timestamp_is_iso_8601_utc_with_milliseconds():
    record = json.loads(json_line({"log_time": 1700000000.1234, "log_level": None, "log_namespace": "x",
                                   "log_format": "m"}))
    assert record["timestamp"] == "2023-11-14T22:13:20.123Z" and record["level"] == "INFO"


def test_a_failure_adds_its_traceback_and_fields_never_replace_the_fixed_keys():
    out = io.StringIO()
    log = Logger(namespace="twisted_kafka.server", observer=json_file_observer(out))
    try:
        raise ValueError("bad value")
    except ValueError:
        log.failure("Error handling {what}", what="a request", message="not the message", logger="not the logger")
    [line] = out.getvalue().splitlines()
    record = json.loads(line)
    assert (record["level"], record["logger"], record["message"], record["what"]) == (
        "FATAL", "twisted_kafka.server", "Error handling a request", "a request")
    assert "ValueError: bad value" in record["exception"]


def test_legacy_events_keep_their_text():
    from twisted.logger import formatEvent
    from twisted.python import log as legacy

    captured = []
    legacy.addObserver(captured.append)
    try:
        legacy.msg("Main loop terminated.")
    finally:
        legacy.removeObserver(captured.append)
    from twisted.logger._legacy import publishToNewObserver

    events = []
    publishToNewObserver(events.append, captured[0], lambda event: formatEvent(event))
    record = json.loads(json_line(events[0]))
    assert record["message"] == "Main loop terminated." and "isError" not in record and "system" not in record
