"""A run of whole record batches still in a segment file: what a zero-copy Fetch sends.

Kafka answers a Fetch on a plaintext listener with ``FileRecords.writeTo``:
the record bytes go from the segment file to the socket with ``sendfile``,
never through the broker's memory.  A ``FileRegion`` is that slice -- a
descriptor, a position, a size -- standing in a response's chunks where
bytes would otherwise be.  ``len()`` is its size, so response framing counts
it like any chunk.  The network layer sends it with ``os.sendfile`` when it
writes straight to a plain TCP socket; anything else (a TLS connection, a
connection with bytes still queued) asks it for its bytes (``read``).

The descriptor is pinned in the log's descriptor cache from the read until
``close()``, so it cannot be closed or reused for another file while the
response is on its way; ``close()`` runs once, and a region dropped unsent
(its connection closed) closes itself when it is collected.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["FileRegion"]


class FileRegion:
    __slots__ = ("fd", "position", "size", "_release", "__weakref__")

    def __init__(self, fd: int, position: int, size: int, release: Callable[[], None]):
        self.fd = fd
        self.position = position
        self.size = size
        self._release: Callable[[], None] | None = release

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return self.size

    def read(self, skip: int = 0) -> bytes:
        """The region's bytes after its first ``skip`` (blocking ``pread``; the file holds them)."""
        if self._release is None:
            raise ValueError("read of a closed FileRegion")
        want = self.size - skip
        parts = []
        position = self.position + skip
        while want > 0:
            data = os.pread(self.fd, want, position)
            if not data:
                raise OSError(f"segment file ended {want} bytes before the end of a region it held")
            parts.append(data)
            want -= len(data)
            position += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def __bytes__(self) -> bytes:
        return self.read()

    def close(self) -> None:
        """Unpin the descriptor (once)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    @property
    def closed(self) -> bool:
        return self._release is None

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FileRegion fd={self.fd} {self.position}+{self.size}>"
