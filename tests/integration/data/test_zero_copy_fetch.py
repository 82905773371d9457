"""Fetch on a plaintext listener sends record batches from the segment file with sendfile.

The broker's send buffer is made small (``socket.send.buffer.bytes``), so a
multi-megabyte fetch answer fills the socket long before its records are
out: the rest waits for the socket, regions unread, and leaves with sendfile
as the client reads.  The client reads slowly through a small receive
buffer; every batch must arrive whole, in order, with its CRC intact.  A
client that goes away in the middle of such an answer costs the broker
nothing: the next client is answered in full.  (TLS listeners copy the
records through memory: tests/integration/security/test_tls_clients.py
consumes over SSL.)
"""

from __future__ import annotations

import socket
import struct

from support.raw_client import RawClient, auto_create_topic
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_response, encode_request
from twisted_kafka.protocol.records.batch import iter_batch_headers, verify_crc
from twisted_kafka.protocol.records.builder import build_batch
from twisted_kafka.protocol.records.record import iter_records

from .helpers import fetch_request, produce_request

BROKER_OVERRIDES = {"num.partitions": "1", "socket.send.buffer.bytes": "8192"}
TOPIC = "zero-copy"
BATCHES = 30
RECORDS_PER_BATCH = 100


def value(batch: int, record: int) -> bytes:
    return (f"{batch:04d}-{record:04d}-".encode() * 100)[:1000]


def write_batches(port: int) -> None:
    with RawClient(port) as client:
        auto_create_topic(client, TOPIC, partitions=1)
        for b in range(BATCHES):
            batch = build_batch([(None, value(b, r)) for r in range(RECORDS_PER_BATCH)])
            answer = client.request(produce_request({TOPIC: {0: batch}}, acks=1))
            assert answer.responses[0].partition_responses[0].error_code == 0


def fetch_frame(port: int, *, slow: bool, stop_after: int | None = None) -> bytes | None:
    """Send one Fetch (v11, everything from offset 0) and read its frame through a small receive buffer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    try:
        body = fetch_request({TOPIC: {0: 0}}, max_bytes=16 << 20, partition_max_bytes=16 << 20)
        sock.sendall(b"".join(encode_request(body, 11, 5, "zero-copy")))
        data = bytearray()
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(2048 if slow else 1 << 20)
            assert chunk, "the broker closed the connection"
            data += chunk
            if stop_after is not None and len(data) >= stop_after:
                return None
        return bytes(data[4:])
    finally:
        sock.close()


def records_of(frame: bytes) -> list[bytes]:
    correlation_id, response = decode_response(m.FetchRequest.API_KEY, 11, frame)
    assert correlation_id == 5
    [topic] = response.responses
    [partition] = topic.partitions
    assert partition.error_code == 0
    data = bytes(partition.records)
    values = []
    for position, header in iter_batch_headers(data):
        verify_crc(data, position, header)          # raises on a damaged batch
        values += [record.value for record in iter_records(data, position, header)]
    return values


def test_a_large_answer_leaves_whole_through_a_full_socket(data_broker):
    write_batches(data_broker.data_port)
    frame = fetch_frame(data_broker.data_port, slow=True)
    assert records_of(frame) == [value(b, r) for b in range(BATCHES) for r in range(RECORDS_PER_BATCH)]


def test_a_client_gone_in_the_middle_of_an_answer_leaves_the_next_one_whole(data_broker):
    for _ in range(3):
        assert fetch_frame(data_broker.data_port, slow=True, stop_after=100_000) is None
    frame = fetch_frame(data_broker.data_port, slow=False)
    assert len(records_of(frame)) == BATCHES * RECORDS_PER_BATCH
