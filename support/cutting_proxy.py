"""A loopback TCP proxy that cuts its connections every so many bytes.

    proxy = CuttingProxy(cut_every=64 * 1024, answer_cut_every=1024, seed=7).start()
    broker = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port},..."})
    proxy.target_port = broker.data_port
    ...                                   # clients bootstrap from 127.0.0.1:{proxy.port}
    proxy.cutting = False                 # let the rest through
    proxy.stop()

Each accepted connection is forwarded to ``127.0.0.1:target_port`` by two
threads (one per direction).  A connection is closed -- both sockets, at
once, with RST on the client side -- once it has carried a byte budget in
one direction, drawn uniformly from [b / 2, 3 * b / 2]:

* requests (b = ``cut_every``, bytes from the client): cuts land inside a
  request (the broker drops the partial request) or right after one;
* answers (b = ``answer_cut_every``, bytes from the broker), for a share
  ``answer_share`` of the connections: the broker served a request and its
  answer is lost, in full or in part -- a retry then repeats a request
  the broker already carried out.

Answers are small next to produce requests, so counting both directions
in one budget would almost never cut inside an answer.  The client
reconnects through the proxy and gets a fresh budget.  ``cuts`` counts the
connections cut this way; ``cuts_after_response_bytes`` those cut while
bytes flowed from the broker (an answer lost for sure).

The listening socket binds port 0; the port is known before the broker
starts, so the broker can advertise it (clients then always come back
through the proxy).
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading

__all__ = ["CuttingProxy"]

_LINGER_RST = struct.pack("ii", 1, 0)


class _Link:
    """One proxied connection: a client socket, a broker socket and a byte budget."""

    def __init__(self, proxy: CuttingProxy, client: socket.socket, upstream: socket.socket, budget: int,
                 counts_answers: bool):
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.budget = budget
        #: True: the budget counts bytes from the broker; False: bytes from the client.
        self.counts_answers = counts_answers
        self.carried = 0
        self.closed = False
        self.lock = threading.Lock()

    def pump(self, source: socket.socket, sink: socket.socket, from_broker: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                with self.lock:
                    if self.closed:
                        return
                    counted = from_broker == self.counts_answers
                    if counted and self.proxy.cutting and self.carried + len(data) >= self.budget:
                        # Let part of this chunk through, then cut.
                        keep = max(0, self.budget - self.carried)
                        if keep:
                            sink.sendall(data[:keep])
                        self.proxy._count_cut(from_broker)
                        self._close(reset=True)
                        return
                    if counted:
                        self.carried += len(data)
                sink.sendall(data)
        except OSError:
            pass
        with self.lock:
            self._close(reset=False)

    def _close(self, *, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                if reset:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self.proxy._forget(self)


class CuttingProxy:
    """See the module docstring."""

    def __init__(self, *, cut_every: int, answer_cut_every: int = 1024, answer_share: float = 0.5, seed: int = 0,
                 target_port: int | None = None):
        self.cut_every = cut_every
        self.answer_cut_every = answer_cut_every
        self.answer_share = answer_share
        self.target_port = target_port
        self.cutting = True
        self.cuts = 0
        self.cuts_after_response_bytes = 0
        self.connections = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._running = False
        self._thread = threading.Thread(target=self._accept_loop, name="cutting-proxy", daemon=True)

    def start(self) -> CuttingProxy:
        self._running = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self._running = False
        with contextlib.suppress(OSError):
            self._listener.close()
        for link in list(self._links):
            with link.lock:
                link._close(reset=False)
        self._thread.join(5)

    def __enter__(self) -> CuttingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _budget(self) -> tuple[int, bool]:
        """A new connection's byte budget, and whether it counts answers (else requests)."""
        with self._lock:
            answers = self._random.random() < self.answer_share
            every = self.answer_cut_every if answers else self.cut_every
            return self._random.randint(every // 2, every * 3 // 2), answers

    def _count_cut(self, from_broker: bool) -> None:
        with self._lock:
            self.cuts += 1
            if from_broker:
                self.cuts_after_response_bytes += 1

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)

    def _accept_loop(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.target_port is None:
                client.close()
                continue
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                upstream.connect(("127.0.0.1", self.target_port))
            except OSError:
                client.close()             # the broker is down: the client sees a refused-like close
                upstream.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, upstream, *self._budget())
            with self._lock:
                self._links.add(link)
                self.connections += 1
            threading.Thread(target=link.pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=link.pump, args=(upstream, client, True), daemon=True).start()
