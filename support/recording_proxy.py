"""A loopback TCP proxy that records the request frames real clients send.

    proxy = RecordingProxy("PLAINTEXT").start()
    broker = BrokerProcess(tmp, {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port},..."}).start()
    proxy.target_port = broker.port("PLAINTEXT")
    ...                                      # clients bootstrap from 127.0.0.1:{proxy.port}
    proxy.stop()
    proxy.connections                        # [RecordedConnection(listener, frames), ...]

Each accepted connection is forwarded to ``127.0.0.1:target_port`` by two
threads, one per direction; the bytes from the client are also cut into
Kafka's size-prefixed frames (requests, and a SASL v0 handshake's raw
tokens, which are framed the same way) and kept per connection, in order.
The listening socket binds port 0, so its port is known before the broker
starts and the broker can advertise it: clients then come back through the
proxy for every connection they open (bootstrap, then the advertised
broker).  What is kept is exactly what the clients sent, whatever the
broker did with it -- the fuzzer's seed corpus (``support/fuzzing.py``).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field

__all__ = ["RecordedConnection", "RecordingProxy"]


@dataclass
class RecordedConnection:
    """The request frames one client connection sent, size prefix excluded, in order."""

    listener: str
    frames: list[bytes] = field(default_factory=list)
    label: str = ""                    # what the capture was doing (which client, which workload)


class _Framer:
    """Cuts a byte stream into size-prefixed frames."""

    def __init__(self, sink: list[bytes]):
        self.sink = sink
        self.buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            (size,) = struct.unpack_from(">i", self.buffer)
            if size < 0 or len(self.buffer) < 4 + size:
                return
            self.sink.append(bytes(self.buffer[4:4 + size]))
            del self.buffer[:4 + size]


class RecordingProxy:
    """See the module docstring."""

    def __init__(self, listener: str, target_port: int | None = None):
        self.listener = listener
        self.target_port = target_port
        self.label = ""                # set by the capture before each workload
        self.connections: list[RecordedConnection] = []
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._running = False
        self._thread = threading.Thread(target=self._accept_loop, name=f"recording-proxy-{listener}", daemon=True)

    def start(self) -> RecordingProxy:
        self._running = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self._running = False
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self._thread.join(5)

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                if self.target_port is None:
                    raise OSError("no target yet")
                upstream.connect(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                upstream.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            recorded = RecordedConnection(self.listener, label=self.label)
            with self._lock:
                self.connections.append(recorded)
                self._sockets.update((client, upstream))
            framer = _Framer(recorded.frames)
            threading.Thread(target=self._pump, args=(client, upstream, framer), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, None), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, framer: _Framer | None) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if framer is not None:
                    framer.feed(data)
                sink.sendall(data)
        except OSError:
            pass
        for sock in (sink, source):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            for sock in (sink, source):
                if sock in self._sockets:
                    self._sockets.discard(sock)
                    sock.close()
