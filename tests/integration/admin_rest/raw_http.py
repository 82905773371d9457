"""HTTP/1.1 by hand over a blocking socket, for what an HTTP client library hides.

The admin endpoint's limits are about *when* the broker answers relative to
the bytes a client has sent (headers only, part of a body, a trickle) and
*whether* it closes the connection afterwards.  treq sends whole requests and
pools or hides connections, so these tests write the bytes themselves and read
the answer and the end of the stream here.
"""

from __future__ import annotations

import os
import select
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


@dataclass
class Answer:
    status: int
    #: Header names in lower case (a repeated header keeps its last value).
    headers: dict[str, str]
    body: bytes


class RawHttp:
    """One connection to ``url`` (``http://host:port``)."""

    def __init__(self, url: str, timeout: float = 10.0):
        parts = urlsplit(url)
        self.host_header = parts.netloc
        self.timeout = timeout
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawHttp:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- sending ------------------------------------------------------------------------

    def head(self, method: str, path: str, headers: dict[str, str] | None = None, *,
             host: str | None = None) -> bytes:
        """The request line and headers (``Host`` is the URL's unless given; None leaves it out)."""
        lines = [f"{method} {path} HTTP/1.1"]
        all_headers = {"Host": host if host is not None else self.host_header, **(headers or {})}
        lines += [f"{name}: {value}" for name, value in all_headers.items() if value is not None]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    # -- receiving ----------------------------------------------------------------------

    def _fill(self, deadline: float) -> bool:
        """Read once more into the buffer; False at the end of the stream."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no answer from the admin endpoint within {self.timeout}s "
                               f"(received so far: {self.buffer[:200]!r})")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            raise TimeoutError(f"no answer from the admin endpoint within {self.timeout}s "
                               f"(received so far: {self.buffer[:200]!r})") from None
        except ConnectionResetError:
            return False
        if not data:
            return False
        self.buffer += data
        return True

    def answer(self, timeout: float | None = None) -> Answer:
        """The next response (a ``100 Continue`` included), its body read by Content-Length or chunks."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill(deadline):
                raise ConnectionError(f"the connection was closed without an answer (got {self.buffer!r})")
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line = self._take_line(deadline)
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    while self._take_line(deadline):         # trailers, up to the empty line
                        pass
                    return Answer(status, headers, body)
                body += self._take(size, deadline)
                self._take(2, deadline)                      # the chunk's CRLF
        return Answer(status, headers, self._take(int(headers.get("content-length", "0")), deadline))

    def _take(self, length: int, deadline: float) -> bytes:
        while len(self.buffer) < length:
            if not self._fill(deadline):
                raise ConnectionError(f"the connection was closed in the middle of a body (got {self.buffer!r})")
        data, self.buffer = self.buffer[:length], self.buffer[length:]
        return data

    def _take_line(self, deadline: float) -> bytes:
        while b"\r\n" not in self.buffer:
            if not self._fill(deadline):
                raise ConnectionError(f"the connection was closed in the middle of a body (got {self.buffer!r})")
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def closed_by_server(self, timeout: float | None = None) -> bool:
        """True when the server ends the stream (FIN or reset) within ``timeout``, with nothing more sent."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        try:
            while self._fill(deadline):
                pass
        except TimeoutError:
            return False
        return True

    def readable_within(self, timeout: float) -> bool:
        """Whether the server sent something (or closed) within ``timeout``: waits for that condition."""
        if self.buffer:
            return True
        readable, _, _ = select.select([self.sock], [], [], timeout)
        return bool(readable)


def files_open_under(pid: int, directory: Path) -> list[str]:
    """The files process ``pid`` holds open under ``directory`` -- unlinked temporary files
    (``O_TMPFILE``, ``tempfile.TemporaryFile``) included, which a directory listing never shows."""
    prefix = str(directory.resolve()) + os.sep
    found = []
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:        # closed while listing
            continue
        if target.startswith(prefix):
            found.append(target)
    return found
