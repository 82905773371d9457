"""ZkClient: ZooKeeper (through kazoo) on the Twisted reactor.

kazoo runs its own threads: a connection thread and a callback thread.  This
module is the only place they meet the reactor, and the bridge goes one way:

* every operation uses kazoo's asynchronous API (``*_async``), whose result
  is handed to the reactor with ``reactor.callFromThread`` -- the reactor
  never waits for ZooKeeper;
* watches (``watch_children``, ``watch_data``) are re-armed and delivered on
  the reactor, always with the znode's *current* value (a watch says "it
  changed", never what to), so callers are idempotent by construction;
* session state changes (kazoo's CONNECTED / SUSPENDED / LOST) reach the
  ``add_session_listener`` callbacks on the reactor.  LOST is the session's
  expiry: its ephemeral znodes are gone and its watches with it -- the
  broker re-registers and a controller resigns (their own listeners); this
  client re-arms every watch on the next session.

An operation that fails because the connection dropped (``ConnectionLoss``)
is retried once the client is connected again, as Kafka's
``retryRequestsUntilConnected`` does; other errors (NoNode, NodeExists,
BadVersion, SessionExpired ...) reach the caller as kazoo's exceptions.

Only ``connect`` (the broker's start, before the reactor runs) and ``close``
(run in a thread) block.  ``zookeeper.connect`` may name a chroot
(``host:port/kafka``); it is created when missing, as Kafka does, and every
path here is then relative to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, ZnodeStat
from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.logger import Logger

__all__ = ["ZkClient", "Watch", "parse_connect", "ZnodeStat", "KazooException", "NoNodeError", "NodeExistsError",
           "BadVersionError", "NotEmptyError", "ConnectionLoss", "SessionExpiredError", "RolledBackError",
           "RuntimeInconsistency",
           "ZkConnectError", "CONNECTED", "SUSPENDED", "LOST"]

CONNECTED, SUSPENDED, LOST = KazooState.CONNECTED, KazooState.SUSPENDED, KazooState.LOST

#: Seconds between a lost connection and the next attempt of an operation.
RETRY_PAUSE_SECONDS = 0.1

#: Errors after which an operation is sent again once the client is connected.
_RETRIABLE = (ConnectionLoss, ConnectionClosedError, OperationTimeoutError)


class ZkConnectError(Exception):
    """No ZooKeeper session within ``zookeeper.connection.timeout.ms``."""


def parse_connect(connect: str) -> tuple[str, str | None]:
    """(hosts, chroot or None) of a ``zookeeper.connect`` value: ``h1:2181,h2:2181/kafka/prod``."""
    connect = connect.strip()
    slash = connect.find("/")
    if slash < 0:
        return connect, None
    hosts, chroot = connect[:slash], connect[slash:].rstrip("/")
    return hosts, (chroot or None)


class Watch:
    """A watch kept armed until ``stop()``; the callback gets the current value on the reactor.

    ``watch_children``: the sorted child names, or None while the znode does
    not exist.  ``watch_data``: ``(data, stat)``, or ``(None, None)`` while
    the znode does not exist (its creation is watched).
    """

    log = Logger(namespace="twisted_kafka.zk.Watch")

    def __init__(self, client: ZkClient, path: str, kind: str, callback: Callable[..., Any]):
        self._client = client
        self.path = path
        self.kind = kind
        self._callback = callback
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        self._client._watches.discard(self)

    # kazoo calls this in its own thread when the watch fires
    def _fired(self, event) -> None:
        self._client._reactor.callFromThread(self.arm)

    def arm(self) -> None:
        if self.stopped:
            return
        client = self._client
        if self.kind == "children":
            d = client._call(lambda k: k.get_children_async(self.path, watch=self._fired))
            d.addCallbacks(lambda children: self._deliver(sorted(children)), self._missing_or_failed)
        else:
            d = client._call(lambda k: k.get_async(self.path, watch=self._fired))
            d.addCallbacks(lambda result: self._deliver(*result), self._missing_or_failed)

    def _missing_or_failed(self, failure) -> None:
        if self.stopped:
            return
        if failure.check(NoNodeError):
            # Watch for the znode's creation; if it was created meanwhile, read it again.
            d = self._client._call(lambda k: k.exists_async(self.path, watch=self._fired))

            def exists(stat):
                if stat is not None:
                    self.arm()
                elif self.kind == "children":
                    self._deliver(None)
                else:
                    self._deliver(None, None)
            d.addCallbacks(exists, self._failed)
            return
        self._failed(failure)

    def _failed(self, failure) -> None:
        if self.stopped or failure.check(SessionExpiredError):
            return          # re-armed on the next session
        self.log.failure("ZooKeeper watch on {path} failed", failure, path=self.path)

    def _deliver(self, *value) -> None:
        if self.stopped:
            return
        try:
            result = self._callback(*value)
        except Exception:
            self.log.failure("Handling a change of {path} failed", path=self.path)
            return
        if hasattr(result, "__await__") or isinstance(result, Deferred):
            d = result if isinstance(result, Deferred) else ensureDeferred(result)
            d.addErrback(lambda f: self.log.failure("Handling a change of {path} failed", f, path=self.path))


class ZkClient:
    """One ZooKeeper session's client, on the reactor; see the module docstring."""

    log = Logger(namespace="twisted_kafka.zk.ZkClient")

    def __init__(self, kazoo: KazooClient, *, reactor, connect: str = ""):
        self._kazoo = kazoo
        self._reactor = reactor
        self.connect_string = connect
        self.state = CONNECTED if kazoo.connected else SUSPENDED
        self.session_id: int | None = kazoo.client_id[0] if kazoo.client_id else None
        self._watches: set[Watch] = set()
        self._listeners: list[Callable[[str], None]] = []
        self._connected_waiters: list[Deferred] = []
        self._closed = False
        kazoo.add_listener(self._kazoo_state)

    @classmethod
    def connect(cls, connect: str, *, session_timeout_ms: int, connection_timeout_ms: int | None, reactor,
                ) -> ZkClient:
        """Open a session (blocking, at most ``connection_timeout_ms``; used before the reactor runs).

        A chroot in ``connect`` is created when missing (Kafka's
        ``createChrootIfNecessary``) and then applies to every path.
        """
        hosts, chroot = parse_connect(connect)
        timeout = (connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms) / 1000.0
        kazoo = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000.0,
                            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2.0})
        try:
            kazoo.start(timeout=timeout)
        except KazooTimeoutError:
            kazoo.close()
            raise ZkConnectError(f"no ZooKeeper session with {hosts} within {timeout * 1000:.0f} ms") from None
        if chroot:
            kazoo.ensure_path(chroot)
            kazoo.chroot = chroot
        return cls(kazoo, reactor=reactor, connect=connect)

    # -- session ------------------------------------------------------------------------

    def add_session_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(state)`` on the reactor for every session state change (CONNECTED / SUSPENDED / LOST)."""
        self._listeners.append(listener)

    def remove_session_listener(self, listener: Callable[[str], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _kazoo_state(self, state) -> bool:
        # kazoo's connection thread: never block here.
        self._reactor.callFromThread(self._state_changed, state)
        return False

    def _state_changed(self, state) -> None:
        if self._closed:
            return          # the session ends because we closed it
        previous = self.state
        self.state = state
        if state == CONNECTED:
            client_id = self._kazoo.client_id
            new_session = client_id is not None and client_id[0] != self.session_id
            self.session_id = client_id[0] if client_id else None
            waiters, self._connected_waiters = self._connected_waiters, []
            for d in waiters:
                d.callback(None)
            if previous == LOST or new_session:
                self.log.info("ZooKeeper session {session:#x} established", session=self.session_id or 0)
                for watch in list(self._watches):
                    watch.arm()
        elif state == LOST:
            self.log.warn("ZooKeeper session {session:#x} expired", session=self.session_id or 0)
        elif state == SUSPENDED:
            self.log.warn("ZooKeeper connection lost; the session lasts while it reconnects")
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                self.log.failure("ZooKeeper session listener failed")

    @property
    def connected(self) -> bool:
        return self.state == CONNECTED

    def when_connected(self) -> Deferred:
        if self.state == CONNECTED and not self._closed:
            return succeed(None)
        d: Deferred = Deferred()
        self._connected_waiters.append(d)
        return d

    # -- operations (Deferreds fired on the reactor) -------------------------------------

    def _bridge(self, async_result) -> Deferred:
        d: Deferred = Deferred()
        reactor = self._reactor

        def done(result) -> None:   # kazoo's thread
            if result.successful():
                reactor.callFromThread(d.callback, result.value)
            else:
                reactor.callFromThread(d.errback, result.exception)

        async_result.rawlink(done)
        return d

    def _call(self, start: Callable[[KazooClient], Any]) -> Deferred:
        """Run one kazoo async operation; sent again after a lost connection."""
        return ensureDeferred(self._retrying(start))

    async def _retrying(self, start: Callable[[KazooClient], Any]):
        while True:
            if self._closed:
                raise ConnectionClosedError("the ZooKeeper client is closed")
            if self.state != CONNECTED:
                await self.when_connected()
            try:
                return await self._bridge(start(self._kazoo))
            except _RETRIABLE:
                if self._closed:
                    raise
                # kazoo may report the loss before the state change reaches the reactor: pause, then
                # wait for the connection if it is still down.
                await deferLater(self._reactor, RETRY_PAUSE_SECONDS, lambda: None)

    def get(self, path: str) -> Deferred:
        """``(data, stat)``; NoNodeError if missing."""
        return self._call(lambda k: k.get_async(path))

    def get_or_none(self, path: str) -> Deferred:
        """``(data, stat)``, or ``(None, None)`` if missing."""
        d = self.get(path)
        d.addErrback(lambda f: f.trap(NoNodeError) and (None, None))
        return d

    def get_children(self, path: str) -> Deferred:
        """Sorted child names; NoNodeError if missing."""
        return self._call(lambda k: k.get_children_async(path)).addCallback(sorted)

    def children_or_empty(self, path: str) -> Deferred:
        d = self.get_children(path)
        d.addErrback(lambda f: f.trap(NoNodeError) and [])
        return d

    def exists(self, path: str) -> Deferred:
        """The znode's stat, or None."""
        return self._call(lambda k: k.exists_async(path))

    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
               makepath: bool = False, include_data: bool = False) -> Deferred:
        """The created path (``(path, stat)`` with ``include_data``); NodeExistsError if it exists."""
        return self._call(lambda k: k.create_async(path, value, ephemeral=ephemeral, sequence=sequence,
                                                   makepath=makepath, include_data=include_data))

    def set(self, path: str, value: bytes, version: int = -1) -> Deferred:
        """The new stat; BadVersionError unless the znode is at ``version`` (-1: any)."""
        return self._call(lambda k: k.set_async(path, value, version))

    def delete(self, path: str, version: int = -1) -> Deferred:
        return self._call(lambda k: k.delete_async(path, version))

    def ensure_path(self, path: str) -> Deferred:
        return self._call(lambda k: k.ensure_path_async(path))

    async def set_or_create(self, path: str, value: bytes) -> None:
        """Write ``value`` whatever the version, creating the znode (and its parents) if needed."""
        while True:
            try:
                await self.set(path, value)
                return
            except NoNodeError:
                pass
            try:
                await self.create(path, value, makepath=True)
                return
            except NodeExistsError:
                continue

    async def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything under it (children first); nothing if it is missing."""
        try:
            children = await self.get_children(path)
        except NoNodeError:
            return
        for child in children:
            await self.delete_recursive(f"{path.rstrip('/')}/{child}")
        with contextlib.suppress(NoNodeError):
            await self.delete(path)

    def multi(self, build: Callable[[Any], None]) -> Deferred:
        """Commit a transaction that ``build(transaction)`` fills (``check``, ``create``, ``set_data``,
        ``delete``); fires with the list of per-operation results (an exception instance for a failed
        one, ``RolledBackError`` for the others then)."""
        def start(k: KazooClient):
            transaction = k.transaction()
            build(transaction)
            return transaction.commit_async()
        return self._call(start)

    # -- watches --------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[..., Any]) -> Watch:
        return self._watch(path, "children", callback)

    def watch_data(self, path: str, callback: Callable[..., Any]) -> Watch:
        return self._watch(path, "data", callback)

    def _watch(self, path: str, kind: str, callback: Callable[..., Any]) -> Watch:
        watch = Watch(self, path, kind, callback)
        self._watches.add(watch)
        watch.arm()
        return watch

    # -- closing --------------------------------------------------------------------------

    def close(self) -> Deferred:
        """End the session (its ephemeral znodes go at once); runs kazoo's blocking stop in a thread."""
        if self._closed:
            return succeed(None)
        self._closed = True
        for watch in list(self._watches):
            watch.stop()
        waiters, self._connected_waiters = self._connected_waiters, []
        for d in waiters:
            d.errback(ConnectionClosedError("the ZooKeeper client is closed"))
        kazoo = self._kazoo

        def stop() -> None:
            try:
                kazoo.stop()
            finally:
                kazoo.close()
        return deferToThread(stop)

    def close_now(self) -> None:
        """End the session from a thread that may block (the broker's start failed before the reactor ran)."""
        self._closed = True
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    @property
    def kazoo(self) -> KazooClient:
        """The underlying kazoo client, for blocking calls before the reactor runs (``bootstrap``)."""
        return self._kazoo
