"""Responses written straight to a socket (``network/direct_write.py``), on a real socket pair."""

from __future__ import annotations

import os
import socket

import pytest

from twisted_kafka.network.direct_write import IOV_MAX, close_regions, send_now, skip_sent, unsent_part
from twisted_kafka.protocol.records.file_region import FileRegion


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def read_all(sock: socket.socket) -> bytes:
    out = bytearray()
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return bytes(out)
        if not chunk:
            return bytes(out)
        out += chunk


def test_chunks_of_bytes_and_memoryviews_leave_in_order_in_one_call(pair):
    a, b = pair
    chunks = [b"\x00\x00\x00\x0b", memoryview(b"xxhello"), b" world"]
    assert send_now(a, chunks) == 4 + 7 + 6
    assert read_all(b) == b"\x00\x00\x00\x0bxxhello world"


def test_more_chunks_than_sendmsg_takes_are_joined(pair):
    a, b = pair
    chunks = [bytes([i % 256]) for i in range(IOV_MAX + 5)]
    assert send_now(a, chunks) == len(chunks)
    assert read_all(b) == b"".join(chunks)


def test_a_full_socket_takes_part_and_the_rest_is_what_follows(pair):
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    payload = [bytes(range(256)) * 64] * 64           # 1 MiB: more than the buffers hold
    sent = send_now(a, payload)
    assert 0 < sent < 1 << 20
    assert send_now(a, payload) == 0                   # full: nothing taken, no exception
    rest = unsent_part(payload, sent)
    assert b"".join(payload)[sent:] == b"".join(rest)
    received = bytearray(read_all(b))
    for chunk in rest:                                 # the remainder, as a transport would send it
        view = memoryview(chunk)
        while view:
            try:
                n = a.send(view)
            except BlockingIOError:
                received += read_all(b)
                continue
            view = view[n:]
    received += read_all(b)
    assert bytes(received) == b"".join(payload)


def test_a_closed_peer_is_left_to_the_transport(pair):
    a, b = pair
    b.close()
    assert send_now(a, [b"abc", b"def"]) == 0


def test_unsent_part_splits_inside_a_chunk():
    assert unsent_part([b"abc", memoryview(b"defg"), b"h"], 5) == [b"fg", b"h"]
    assert unsent_part([b"abc", b"d"], 3) == [b"d"]
    assert unsent_part([b"abc"], 0) == [b"abc"]


class Released:
    def __init__(self):
        self.count = 0

    def __call__(self):
        self.count += 1


@pytest.fixture
def segment_file(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 4096)          # 1 MiB
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


def test_regions_go_with_sendfile_between_the_buffers_around_them(pair, segment_file):
    a, b = pair
    released = Released()
    region = FileRegion(segment_file, 1000, 3000, released)
    chunks = [b"head", region, b"tail"]
    assert send_now(a, chunks) == 4 + 3000 + 4
    close_regions(chunks)
    assert read_all(b) == b"head" + (bytes(range(256)) * 4096)[1000:4000] + b"tail"
    assert released.count == 1 and region.closed


def test_what_the_socket_does_not_take_is_read_from_the_file_and_every_region_closed(pair, segment_file):
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    data = bytes(range(256)) * 4096
    released = [Released(), Released()]
    chunks = [b"head", FileRegion(segment_file, 0, 600_000, released[0]), b"mid",
              FileRegion(segment_file, 600_000, 400_000, released[1]), b"tail"]
    sent = send_now(a, chunks)
    assert 0 < sent < 1_000_011
    rest = unsent_part(chunks, sent)
    assert all(type(chunk) is not FileRegion for chunk in rest)
    assert [r.count for r in released] == [1, 1]
    expected = b"head" + data[:600_000] + b"mid" + data[600_000:1_000_000] + b"tail"
    assert b"".join(bytes(c) for c in rest) == expected[sent:]
    received = bytearray(read_all(b))
    for chunk in rest:
        view = memoryview(chunk)
        while view:
            try:
                n = a.send(view)
            except BlockingIOError:
                received += read_all(b)
                continue
            view = view[n:]
    received += read_all(b)
    assert bytes(received) == expected


def test_a_region_past_the_end_of_its_file_fails_the_read_and_is_closed(pair, segment_file):
    released = Released()
    chunks = [FileRegion(segment_file, (1 << 20) - 10, 100, released)]
    with pytest.raises(OSError):
        unsent_part(chunks, 0)
    assert released.count == 1


def test_skip_sent_keeps_regions_unread_and_moves_a_partly_sent_one(segment_file):
    released = [Released(), Released()]
    first, second = FileRegion(segment_file, 0, 100, released[0]), FileRegion(segment_file, 100, 50, released[1])
    rest = skip_sent([b"head", first, b"mid", second], 4 + 100 + 1)
    assert first.closed and released[0].count == 1            # sent whole: unpinned
    assert rest == [b"id", second] and not second.closed
    rest = skip_sent(rest, 2 + 20)
    assert rest == [second] and (second.position, second.size) == (120, 30)
    assert second.read() == (bytes(range(256)) * 4096)[120:150]
