"""The one exception type the codec raises for bytes it cannot accept.

The network layer catches exactly this type: it closes the offending
connection and logs the peer and ``str(exc)``; nothing else is affected.
Anything else escaping the codec is a bug in the codec, not in the input.
"""


class ProtocolDecodeError(ValueError):
    """Request (or batch) bytes that are truncated, malformed or of an unknown shape.

    ``api_key``, ``api_version`` and ``correlation_id`` are filled in as far as
    the header could be read (``None`` when not known), so a log line or an error
    response can name what was being parsed.
    """

    def __init__(self, reason: str, *, api_key: int | None = None,
                 api_version: int | None = None, correlation_id: int | None = None):
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        where = []
        if api_key is not None:
            where.append(f"api_key={api_key}")
        if api_version is not None:
            where.append(f"api_version={api_version}")
        if correlation_id is not None:
            where.append(f"correlation_id={correlation_id}")
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)
