"""Writing a response straight to a socket, as far as the socket takes it.

``Processor._write`` uses it for plain TCP connections whose transport holds
no unsent bytes: one ``sendmsg`` of the response's chunks (bytes or
memoryviews of record data, never joined), and what the socket did not take
goes to the transport's buffer.  A socket error is not handled here: the
unsent bytes go to the transport, whose own write meets the error again and
loses the connection the usual way.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

#: sendmsg takes at most this many buffers (Linux's IOV_MAX); longer responses are joined first.
IOV_MAX = 1024


def send_now(sock: socket.socket, chunks: Sequence) -> int:
    """Send ``chunks`` on the non-blocking ``sock`` without waiting; the number of bytes it took."""
    try:
        if len(chunks) == 1:
            return sock.send(chunks[0])
        if len(chunks) <= IOV_MAX:
            return sock.sendmsg(chunks)
        return sock.send(b"".join(chunks))
    except OSError:        # EAGAIN / ENOBUFS: nothing taken; anything else: the transport finds it again
        return 0


def unsent_part(chunks: Sequence, sent: int) -> list:
    """What is left of ``chunks`` once their first ``sent`` bytes have gone."""
    rest = []
    for chunk in chunks:
        size = len(chunk)
        if sent >= size:
            sent -= size
            continue
        rest.append(chunk[sent:] if sent else chunk)
        sent = 0
    return rest


__all__ = ["send_now", "unsent_part", "IOV_MAX"]
