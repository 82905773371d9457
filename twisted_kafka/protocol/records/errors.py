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
    known: log recovery truncates there.
    """

    def __init__(self, reason: str, error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE,
                 *, position: int | None = None, **kwargs):
        super().__init__(reason, **kwargs)
        self.error_code = ErrorCode(error_code)
        self.position = position

    def at(self, position: int) -> InvalidRecordBatch:
        """Fill in ``position`` if it is not known yet; returns self.

        A new error is raised as ``raise InvalidRecordBatch(...).at(pos)``; a
        caught one is filled in, then re-raised with a bare ``raise``, which
        keeps its traceback.
        """
        if self.position is None:
            self.position = position
        return self
