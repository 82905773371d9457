"""The one exception type for record bytes the broker cannot accept.

It lives in its own module because every other module of this package raises
it (compression, batch header, record iteration, produce validation) and
``batch.py`` re-exports it under the name the log layer imports.
"""

from __future__ import annotations

from ..errors import ErrorCode
from ..exceptions import ProtocolDecodeError


class InvalidRecordBatch(ProtocolDecodeError):
    """A record batch (or a records blob) that fails validation.

    ``error_code`` is the Kafka error a Produce response answers with for
    this problem (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, ...),
    chosen as Apache Kafka's broker chooses it.  ``position`` is the byte
    offset of the offending batch inside the blob that was being walked, when
    known: log recovery truncates there.  ``record_errors`` lists the records
    that made the batch fail, as ``(index in the batch, message)`` pairs: the
    per-record errors of KIP-467, which a Produce response (v8+) carries back.
    """

    def __init__(self, reason: str, error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE,
                 *, position: int | None = None, record_errors: list[tuple[int, str]] | None = None,
                 **kwargs):
        super().__init__(reason, **kwargs)
        self.error_code = ErrorCode(error_code)
        self.position = position
        self.record_errors: list[tuple[int, str]] = list(record_errors or ())

    def at(self, position: int) -> InvalidRecordBatch:
        """Fill in ``position`` if it is not known yet; returns self.

        A new error is raised as ``raise InvalidRecordBatch(...).at(pos)``; a
        caught one is filled in, then re-raised with a bare ``raise``, which
        keeps its traceback.
        """
        if self.position is None:
            self.position = position
        return self
