"""Writing a response straight to a socket, as far as the socket takes it.

``Processor._write`` uses it for plain TCP connections whose transport holds
no unsent bytes: the response's chunks (bytes, memoryviews of record data,
never joined) leave with ``sendmsg``, and its ``FileRegion``s -- record
batches left in their segment file by a Fetch on a plaintext listener --
with ``os.sendfile``, from the page cache to the socket without passing
through the broker's memory (Kafka's ``FileRecords.writeTo``).  What the
socket did not take of a response with regions waits, regions unread
(``skip_sent``), until the socket takes more; the rest of a response
without regions goes to the transport's buffer (``unsent_part``), which is
also where a region is read into memory when the connection cannot take it
directly (TLS, bytes already queued, a graceful close).

A socket error is not handled here: the unsent bytes go to the transport,
whose own write meets the error again and loses the connection the usual
way.  Every region is closed (its descriptor unpinned) once it is sent or
read.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from twisted_kafka.protocol.records.file_region import FileRegion

#: sendmsg takes at most this many buffers (Linux's IOV_MAX); longer responses are joined first.
IOV_MAX = 1024


def _send_buffers(sock: socket.socket, chunks: Sequence) -> int:
    try:
        if len(chunks) == 1:
            return sock.send(chunks[0])
        if len(chunks) <= IOV_MAX:
            return sock.sendmsg(chunks)
        return sock.send(b"".join(chunks))
    except OSError:        # EAGAIN / ENOBUFS: nothing taken; anything else: the transport finds it again
        return 0


def _send_region(fd: int, region: FileRegion) -> int:
    sent = 0
    while sent < region.size:
        try:
            n = os.sendfile(fd, region.fd, region.position + sent, region.size - sent)
        except OSError:    # EAGAIN: the socket is full; anything else: the transport finds it again
            break
        if n == 0:         # the file is shorter than the region: unsent_part's read says so
            break
        sent += n
    return sent


def has_regions(chunks: Sequence) -> bool:
    return any(type(chunk) is FileRegion for chunk in chunks)


def send_now(sock: socket.socket, chunks: Sequence) -> int:
    """Send ``chunks`` on the non-blocking ``sock`` without waiting; the number of bytes it took."""
    if not has_regions(chunks):
        return _send_buffers(sock, chunks)
    fd = sock.fileno()
    sent = 0
    pending: list = []
    pending_size = 0
    for chunk in chunks:
        if type(chunk) is FileRegion:
            if pending:
                n = _send_buffers(sock, pending)
                sent += n
                if n < pending_size:
                    return sent
                pending = []
                pending_size = 0
            n = _send_region(fd, chunk)
            sent += n
            if n < chunk.size:
                return sent
        else:
            pending.append(chunk)
            pending_size += len(chunk)
    if pending:
        sent += _send_buffers(sock, pending)
    return sent


def close_regions(chunks: Sequence) -> None:
    """Every region among ``chunks`` has been sent: unpin their descriptors."""
    for chunk in chunks:
        if type(chunk) is FileRegion:
            chunk.close()


def skip_sent(chunks: Sequence, sent: int) -> list:
    """What is left of ``chunks`` once their first ``sent`` bytes have gone, regions kept as regions
    (a partly sent one moved past what left); the regions sent whole are closed."""
    rest = []
    for chunk in chunks:
        size = len(chunk)
        if sent >= size:
            sent -= size
            if type(chunk) is FileRegion:
                chunk.close()
            continue
        if sent:
            if type(chunk) is FileRegion:
                chunk.position += sent
                chunk.size -= sent
            else:
                chunk = chunk[sent:]
            sent = 0
        rest.append(chunk)
    return rest


def unsent_part(chunks: Sequence, sent: int) -> list:
    """What is left of ``chunks`` once their first ``sent`` bytes have gone, as bytes-like chunks: the
    regions are read (what is left of them) and closed.  Raises OSError when a region's file cannot
    give its bytes (every region is closed all the same)."""
    rest = []
    try:
        for chunk in chunks:
            size = len(chunk)
            if type(chunk) is FileRegion:
                if sent >= size:
                    sent -= size
                    chunk.close()
                    continue
                rest.append(chunk.read(sent))
                chunk.close()
                sent = 0
                continue
            if sent >= size:
                sent -= size
                continue
            rest.append(chunk[sent:] if sent else chunk)
            sent = 0
    finally:
        close_regions(chunks)
    return rest


__all__ = ["send_now", "skip_sent", "unsent_part", "close_regions", "has_regions", "IOV_MAX"]
