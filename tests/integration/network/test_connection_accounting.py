"""Thousands of connections closed every way leave no count behind in ConnectionQuotas.

A connection is counted once and released exactly once, whatever closes it:
the client (FIN or RST, with or without a request queued), the idle reaper,
the per-IP quota, a protocol error, LRU eviction for the inter-broker
listener, or shutdown.  These tests run the real network stack in-process
(``inprocess.InProcessBroker``, on the real reactor and real loopback
sockets) because the counts are only visible from inside until the admin
endpoint exists; the clients are blocking sockets in threads.
"""

from __future__ import annotations

import struct

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial import unittest

from support.raw_client import RawClient, frame
from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.protocol.messages import MetadataRequest

from .inprocess import GatedHandler, InProcessBroker

UNKNOWN_API = frame(struct.pack(">hhih", 4242, 0, 1, -1))


def client_closes(port: int, cycles: int) -> None:
    for _ in range(cycles):
        with RawClient(port) as client:
            assert client.api_versions(0).error_code == 0


def client_resets(port: int, cycles: int, *, with_request_in_flight: bool) -> None:
    for _ in range(cycles):
        client = RawClient(port)
        if with_request_in_flight:
            client.send_request(MetadataRequest(version=1, topics=None))
        else:
            client.api_versions(0)
        client.abort()


def protocol_errors(port: int, cycles: int) -> None:
    for _ in range(cycles):
        with RawClient(port) as client:
            client.send_raw(UNKNOWN_API)
            assert client.wait_closed(5)


def per_ip_rejections(port: int, cycles: int) -> None:
    with RawClient(port, source="127.0.0.3") as held:       # 127.0.0.3 may hold one connection
        held.api_versions(0)
        for n in range(cycles):
            with RawClient(port, source="127.0.0.3") as rejected:
                assert rejected.wait_closed(5), "over the per-IP limit: EOF"
            if n % 50 == 0:
                held.api_versions(0)                        # stay clear of the idle reaper


def idle_reaped(port: int, count: int) -> None:
    clients = open_and_hold(port, count)
    for client in clients:
        assert client.wait_closed(10), "closed by the idle reaper"
        client.close()


def queue_and_close(port: int, count: int) -> None:
    """Each connection leaves a Metadata request behind it (handled, queued or waiting for room)."""
    clients = [RawClient(port) for _ in range(count)]
    for client in clients:
        client.send_request(MetadataRequest(version=1, topics=None))
    for n, client in enumerate(clients):
        if n % 2:
            client.abort()
        else:
            client.close()


def open_and_hold(port: int, count: int) -> list[RawClient]:
    clients = []
    for _ in range(count):
        clients.append(RawClient(port))
        clients[-1].api_versions(0)
    return clients


def close_all(clients) -> None:
    for client in clients:
        client.close()


class ConnectionAccountingTest(unittest.TestCase):
    timeout = 120
    SCALE = 1      # 2000 connections; the slow variant below runs ten times as many

    async def test_two_thousand_connections_over_every_close_path_leave_every_count_at_zero(self):
        k = self.SCALE
        gate = GatedHandler()
        broker = InProcessBroker({
            "max.connections.per.ip.overrides": "127.0.0.3:1",
            "connections.max.idle.ms": "1000",
            "num.io.threads": "1",
            "queued.max.requests": "4",
        }, handlers=[gate])
        await broker.start()
        port = broker.port("PLAINTEXT")
        try:
            await deferToThread(client_closes, port, 650 * k)
            await deferToThread(client_resets, port, 200 * k, with_request_in_flight=False)
            await deferToThread(client_resets, port, 100 * k, with_request_in_flight=True)
            await deferToThread(protocol_errors, port, 300 * k)
            await deferToThread(per_ip_rejections, port, 200 * k)
            await deferToThread(idle_reaped, port, 200 * k)
            broker.socket_server.max_idle_seconds = 600.0   # the reaper has had its turn
            for _ in range(3 * k):
                gate.gate = Deferred()
                await deferToThread(queue_and_close, port, 100)
                # One request in the handler, 4 queued, 95 connections waiting for room.  A
                # connection keeps reading while its request waits (up to READ_AHEAD_BYTES), so
                # the broker sees every close at once: the queued requests stay, to be answered
                # to no one, and the waiting connections are forgotten.
                await broker.wait_until(lambda: broker.quotas.total == 0 and broker.pools[0].handling == 1,
                                        what="the connections to close and the handler to hold a request")
                channel = broker.data_channel
                self.assertEqual(channel.waiting_processors, 0)
                self.assertEqual(channel.outstanding, channel.queue_size + 1)
                self.assertLessEqual(channel.queue_size, 4)
                gate.gate.callback(None)
                gate.gate = None
                await broker.wait_until(lambda: broker.quotas.total == 0, what="queued connections to close")
            await broker.wait_until(broker.all_zero, what="every count to return to zero")

            quotas = broker.quotas
            admitted = (650 + 300 + 300 + 200 + 300) * k + 1
            self.assertEqual(sum(quotas.accepted.values()), admitted)
            self.assertEqual(sum(quotas.closed.values()), admitted)
            self.assertEqual(quotas.rejected[("PLAINTEXT", "max.connections.per.ip")], 200 * k)
            self.assertEqual(quotas.closed[("PLAINTEXT", CloseReason.PROTOCOL_ERROR)], 300 * k)
            self.assertGreaterEqual(quotas.closed[("PLAINTEXT", CloseReason.IDLE)], 200 * k)
            self.assertGreaterEqual(quotas.closed[("PLAINTEXT", CloseReason.CLIENT)], (650 + 300 + 300) * k)
            self.assertEqual(broker.data_channel.held_bytes, 0)

            held = await deferToThread(open_and_hold, port, 50)
        finally:
            await broker.stop()
        await deferToThread(close_all, held)
        self.assertEqual(broker.quotas.closed[("PLAINTEXT", CloseReason.SHUTDOWN)], 50)
        self.assertTrue(broker.all_zero(), broker.counts())
        self.assertEqual(sum(broker.quotas.accepted.values()), sum(broker.quotas.closed.values()))

    async def test_parked_and_evicted_connections_are_released_once(self):
        """max.connections with a protected inter-broker listener: waiting (parked or
        backlogged) client connections, LRU evictions, closes of waiting connections."""
        broker = InProcessBroker({
            "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "max.connections": "5",
        })
        await broker.start()
        client_port, internal_port = broker.port("CLIENT"), broker.port("INTERNAL")

        def round_trip() -> None:
            first = open_and_hold(client_port, 5)
            waiting = [RawClient(client_port) for _ in range(5)]
            for client in waiting:
                client.send_raw(frame(struct.pack(">hhih", 18, 0, 7, -1)))   # ApiVersions v0
            assert waiting[0].no_response_within(0.2), "at max.connections a new connection waits"
            assert all(c.no_response_within(0) for c in waiting)
            waiting[4].close()                   # a waiting connection gives up
            close_all(first)                     # the others are admitted
            for client in waiting[:4]:
                assert client.read_response(18, 0)[0] == 7
            # 4 clients + 5 inter-broker connections: each one past the limit evicts the LRU client.
            internal = open_and_hold(internal_port, 5)
            for client in waiting[:4]:
                assert client.wait_closed(5), "evicted as least recently used"
            close_all(internal + waiting)

        for _ in range(10 * self.SCALE):
            await deferToThread(round_trip)
        try:
            await broker.wait_until(broker.all_zero, what="every count to return to zero")
            quotas = broker.quotas
            self.assertEqual(quotas.closed[("CLIENT", CloseReason.QUOTA)], 40 * self.SCALE)
            self.assertEqual(sum(quotas.accepted.values()), sum(quotas.closed.values()))
        finally:
            await broker.stop()


@pytest.mark.slow
class ConnectionAccountingSoakTest(ConnectionAccountingTest):
    """The same, with 20 000 connections (``make test-slow``)."""

    timeout = 900
    SCALE = 10
