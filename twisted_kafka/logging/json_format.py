"""``log.format=json``: each log event as one JSON object on one line.

    {"timestamp": "2025-01-31T09:15:02.481Z", "level": "INFO", "logger": "kafka.request.logger",
     "message": "Completed request: api=Metadata, ...", "api": "Metadata", "total_time_ms": 0.412, ...}

``timestamp`` is ISO-8601 in UTC with milliseconds; ``level`` is log4j's name
(DEBUG, INFO, WARN, ERROR, FATAL for twisted.logger's critical); ``logger``
is the event's namespace; ``message`` the text the plain format shows; a
logged failure adds ``exception``, its traceback.  The event's own fields
follow, those whose values JSON can hold (strings, numbers, booleans, null,
lists and objects of them): the request log's ``api``, ``client_id``,
``total_time_ms``... are fields a log pipeline can filter on without parsing
the message.

twisted.logger's ``jsonFileLogObserver`` was not used: it writes the event
for ``eventFromJSON`` to read back (a record separator before each object,
the unformatted ``log_format`` and every ``log_`` key), not a readable
message per line.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import IO, Any

from twisted.logger import FileLogObserver, LogLevel, formatEvent

__all__ = ["json_line", "json_file_observer", "LEVEL_NAMES"]

#: twisted.logger's levels by log4j's names.
LEVEL_NAMES = {LogLevel.debug: "DEBUG", LogLevel.info: "INFO", LogLevel.warn: "WARN", LogLevel.error: "ERROR",
               LogLevel.critical: "FATAL"}

_FIXED = ("timestamp", "level", "logger", "message", "exception")
#: Keys of events from twisted.python.log's legacy API that repeat what the fixed keys say.
_LEGACY = frozenset({"message", "isError", "system", "time", "format", "why", "failure", "printed"})


def _jsonable(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth > 8:
        return False
    if isinstance(value, (list, tuple)):
        return all(_jsonable(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _jsonable(item, depth + 1) for key, item in value.items())
    return False


def json_line(event: dict) -> str:
    """``event`` as one JSON object (no newline in it)."""
    when = event.get("log_time")
    stamp = datetime.fromtimestamp(when if when is not None else 0, UTC)
    record: dict[str, Any] = {
        "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
        "level": LEVEL_NAMES.get(event.get("log_level"), "INFO"),
        "logger": event.get("log_namespace") or "",
        "message": formatEvent(event),
    }
    failure = event.get("log_failure")
    if failure is not None:
        try:
            record["exception"] = failure.getTraceback()
        except Exception:               # a failure that cannot print itself still leaves its line
            record["exception"] = repr(failure)
    for key, value in event.items():
        if key.startswith("log_") or key in _LEGACY or key in record or not _jsonable(value):
            continue
        record[key] = value
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def json_file_observer(out_file: IO[Any]) -> FileLogObserver:
    """A log observer writing each event to ``out_file`` as a JSON line."""
    return FileLogObserver(out_file, lambda event: json_line(event) + "\n")
