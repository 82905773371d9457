"""Accepted sockets carry TCP_NODELAY and the configured buffer sizes (socket.send.buffer.bytes,
socket.receive.buffer.bytes; -1 keeps the OS default), on real sockets."""

from __future__ import annotations

import socket

from twisted.internet.threads import deferToThread
from twisted.trial import unittest

from support.raw_client import RawClient

from .inprocess import InProcessBroker


class SocketOptionsTest(unittest.TestCase):
    timeout = 30

    async def accepted_socket_options(self, overrides):
        broker = InProcessBroker(overrides)
        await broker.start()
        client = await deferToThread(RawClient, broker.port("PLAINTEXT"))
        try:
            await deferToThread(client.api_versions, 0)
            [processor] = list(broker.socket_server.registry)
            sock = processor.transport.getHandle()
            return (sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        finally:
            client.close()
            await broker.stop()

    async def test_configured_sizes_and_nodelay(self):
        nodelay, sndbuf, rcvbuf = await self.accepted_socket_options(
            {"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "32768"})
        self.assertTrue(nodelay)
        # Linux doubles the requested size for bookkeeping; other systems keep it.
        self.assertIn(sndbuf, (65536, 131072))
        self.assertIn(rcvbuf, (32768, 65536))

    async def test_minus_one_keeps_the_system_default(self):
        nodelay, sndbuf, _ = await self.accepted_socket_options(
            {"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1"})
        self.assertTrue(nodelay)
        # Not fixed at the default key value (102400, doubled by Linux): the kernel autotunes it.
        self.assertNotIn(sndbuf, (102400, 204800))
