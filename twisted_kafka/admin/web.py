"""The admin endpoint's ``twisted.web`` resource: routing, authentication, JSON in and out.

One leaf resource routes every path (the set is small and fixed, see
``_route``), so authentication and errors are handled in one place.  What
can be decided on the request line and headers -- ``Host``, token, route,
method -- is ``AdminResource.check``, which the HTTP channel calls as soon as
the headers have arrived (``channel.py``), so a refused request never has its
body read:

* without a token, a ``Host`` that is not one of the endpoint's own names
  is refused with 421 (DNS rebinding, see ``hosts.py``);
* health checks (``/v1/health/*``) are always open: orchestrators probe them;
  so is the dashboard page (``/``), which holds no data;
* with ``admin.rest.auth.token`` set, every other call needs
  ``Authorization: Bearer <token>``; without it, read-only calls are open and
  changes (PUT, POST, DELETE) are refused -- both with 401;
* every error is JSON ``{"error_code": ..., "message": ...}`` with a fitting
  HTTP status; ``error_code`` is Kafka's error name when the change was
  refused by the broker (``INVALID_REQUEST``), else an HTTP-level name.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.logger import Logger
from twisted.web.http_headers import Headers
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from twisted_kafka.protocol.errors import KafkaError

from . import dashboard, openapi, prometheus, quotas, views
from .hosts import HostRule

#: The challenge of a 401 (RFC 6750).
WWW_AUTHENTICATE = 'Bearer realm="twisted-kafka-admin"'


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class AdminBackend:
    """What the endpoint reads and changes (the broker's parts, given by ``KafkaServer``)."""

    socket_server: Any
    admin_manager: Any
    dynamic_config: Any
    metrics: Any
    broker_id: int
    readiness: Callable[[], dict[str, bool]]
    #: Re-reads every TLS listener's certificates and the endpoint's own: name -> "reloaded" / "unchanged" /
    #: the error (``KafkaServer.reload_certificates``).
    reload_certificates: Callable[[], dict[str, str]] | None = None
    #: The data the topic, group and broker views read: ``ReplicaManager``, ``MetadataCache``,
    #: ``GroupCoordinator`` (None in a backend built without them: those routes answer 404).
    replica_manager: Any = None
    metadata_cache: Any = None
    group_coordinator: Any = None


def path_of(postpath: list[bytes]) -> str:
    """The path routed on, from the request's (already unquoted) path segments."""
    return "/" + "/".join(segment.decode("utf-8", "replace") for segment in postpath)


def error_body(exc: HttpError) -> bytes:
    return json.dumps({"error_code": exc.code, "message": exc.message}).encode("utf-8")


def _query(request, name: str) -> str | None:
    values = request.args.get(name.encode())
    return values[0].decode("utf-8", "replace") if values else None


class AdminResource(Resource):
    isLeaf = True
    log = Logger(namespace="twisted_kafka.admin.AdminResource")

    def __init__(self, backend: AdminBackend, token: str | None, hosts: HostRule):
        super().__init__()
        self.backend = backend
        self.token = token
        self.hosts = hosts
        self.reads = self._reads()

    # -- dispatch -----------------------------------------------------------------------

    def check(self, method: str, path: str, headers: Headers, local_address: str) -> Callable[[Any], Any]:
        """Everything decided on the request line and headers alone -- ``Host``, token, route, method -- as
        the handler to call with the request, or ``HttpError``.  The channel calls it when the headers have
        arrived, before any body is read (``channel.AdminChannel``), and ``render`` again with the request."""
        if self.token is None:
            hosts = headers.getRawHeaders(b"host") or []
            if len(hosts) > 1:
                raise HttpError(400, "BAD_REQUEST", "more than one Host header")
            if hosts and not self.hosts.allows(hosts[0].decode("latin-1"), local_address):
                raise HttpError(421, "MISDIRECTED_REQUEST",
                                f"this endpoint does not answer to Host {hosts[0].decode('latin-1')!r} without "
                                f"admin.rest.auth.token; add the name to admin.rest.allowed.hosts to serve it")
        authorization = headers.getRawHeaders(b"authorization") or [b""]
        return self._route(method, path, authorization[0].decode("latin-1"))

    def render(self, request):
        path = path_of(request.postpath)
        method = request.method.decode("ascii", "replace")
        try:
            handler = self.check(method, path, request.requestHeaders, request.getHost().host)
            result = handler(request)
        except HttpError as exc:
            return self._error(request, exc)
        except Exception:
            self.log.failure("Admin REST {method} {path} failed", method=method, path=path)
            return self._error(request, HttpError(500, "INTERNAL_ERROR", "the broker failed to answer"))
        if hasattr(result, "__await__"):
            d = ensureDeferred(result)
            d.addCallback(lambda body: self._finish(request, body))
            d.addErrback(lambda failure: self._finish_error(request, failure, method, path))
            return NOT_DONE_YET
        return result

    def _finish(self, request, body: bytes) -> None:
        if not request.finished and not getattr(request, "_disconnected", False):
            request.write(body)
            request.finish()

    def _finish_error(self, request, failure, method: str, path: str) -> None:
        exc = failure.value
        if not isinstance(exc, HttpError):
            self.log.failure("Admin REST {method} {path} failed", failure, method=method, path=path)
            exc = HttpError(500, "INTERNAL_ERROR", "the broker failed to answer")
        self._finish(request, self._error(request, exc))

    def _reads(self) -> dict[str, Callable[[Any], Any]]:
        """The read-only routes: path -> handler of the request (built once; ``check`` runs twice a request)."""
        backend = self.backend
        routes = {
            "/": lambda request: self._html(request, dashboard.PAGE),
            "/metrics": self._metrics,
            "/v1/openapi.json": lambda request: self._json(request, openapi.document(self._listener_names())),
            "/v1/health/live": lambda request: self._json(request, {"status": "live"}),
            "/v1/health/ready": self._ready,
            "/v1/connections": lambda request: self._json(request, views.connections(
                backend.socket_server, listener=_query(request, "listener"), ip=_query(request, "ip"))),
            "/v1/connections/ips": lambda request: self._json(request, views.ips(backend.socket_server,
                                                                                  ip=_query(request, "ip"))),
            "/v1/connections/live": lambda request: self._json(request, views.live(
                backend.socket_server, listener=_query(request, "listener"), ip=_query(request, "ip"))),
            "/v1/quotas": lambda request: self._json(request, self._quotas()),
            "/v1/planes": lambda request: self._json(request, views.planes(backend.socket_server, backend.metrics)),
        }
        if backend.replica_manager is not None:
            routes.update({
                "/v1/topics": lambda request: self._json(request, views.topics(
                    backend.metadata_cache, backend.replica_manager, topic=_query(request, "topic"))),
                "/v1/groups": lambda request: self._json(request, views.groups(
                    backend.group_coordinator, backend.replica_manager, group=_query(request, "group"))),
                "/v1/brokers": lambda request: self._json(request, views.brokers(backend.metadata_cache)),
            })
        return routes

    def _route(self, method: str, path: str, authorization: str) -> Callable[[Any], Any]:
        path = path.rstrip("/") or "/"
        read = self.reads
        if path == "/" and method in ("GET", "HEAD"):
            return read[path]     # the static dashboard page: its script sends the token
        if path.startswith("/v1/health/"):
            if path in read and method in ("GET", "HEAD"):
                return read[path]
            raise self._not_found_or_method(path, read)
        if path == "/v1/tls/reload":
            if method != "POST":
                self._authorize(authorization, mutating=False)
                raise HttpError(405, "METHOD_NOT_ALLOWED", f"only POST is allowed on {path}")
            self._authorize(authorization, mutating=True)
            return self._reload_tls
        if path == "/v1/quotas" and method == "PUT":
            self._authorize(authorization, mutating=True)
            return self._put_quotas
        prefix = "/v1/connections/"
        if method == "DELETE" and path.startswith(prefix) and path[len(prefix):] not in ("", "ips", "live"):
            self._authorize(authorization, mutating=True)
            connection_id = path[len(prefix):]
            return lambda request: self._close(request, connection_id)
        if path in read and method in ("GET", "HEAD"):
            self._authorize(authorization, mutating=False)
            return read[path]
        if path in read or path.startswith(prefix):
            self._authorize(authorization, mutating=False)
            raise HttpError(405, "METHOD_NOT_ALLOWED", f"{method} is not allowed on {path}")
        raise HttpError(404, "NOT_FOUND", f"no such resource: {path}")

    @staticmethod
    def _not_found_or_method(path: str, read) -> HttpError:
        if path in read:
            return HttpError(405, "METHOD_NOT_ALLOWED", f"only GET is allowed on {path}")
        return HttpError(404, "NOT_FOUND", f"no such resource: {path}")

    def _authorize(self, authorization: str, *, mutating: bool) -> None:
        if self.token is None:
            if mutating:
                raise HttpError(401, "UNAUTHORIZED", "changes need admin.rest.auth.token, which is not set")
            return
        scheme, _, given = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise HttpError(401, "UNAUTHORIZED", "a valid 'Authorization: Bearer <token>' header is required")

    # -- responses ------------------------------------------------------------------------

    @staticmethod
    def _json(request, body: Any, status: int = 200) -> bytes:
        request.setResponseCode(status)
        request.setHeader("content-type", "application/json")
        request.setHeader("cache-control", "no-store")
        return json.dumps(body, sort_keys=False).encode("utf-8")

    @staticmethod
    def _html(request, page: str) -> bytes:
        request.setHeader("content-type", "text/html; charset=utf-8")
        request.setHeader("cache-control", "no-store")
        return page.encode("utf-8")

    def _error(self, request, exc: HttpError) -> bytes:
        if exc.status == 401:
            request.setHeader("www-authenticate", WWW_AUTHENTICATE)
        request.setResponseCode(exc.status)
        request.setHeader("content-type", "application/json")
        request.setHeader("cache-control", "no-store")
        return error_body(exc)

    def _metrics(self, request) -> bytes:
        request.setHeader("content-type", "text/plain; version=0.0.4; charset=utf-8")
        return prometheus.render(self.backend.metrics, self.backend.socket_server.connection_stats)

    def _ready(self, request) -> bytes:
        checks = self.backend.readiness()
        ready = all(checks.values())
        return self._json(request, {"status": "ready" if ready else "not ready", "checks": checks},
                          200 if ready else 503)

    # -- connections -----------------------------------------------------------------------

    def _close(self, request, connection_id: str) -> bytes:
        if not self.backend.socket_server.close_connection(connection_id):
            raise HttpError(404, "NOT_FOUND", f"no open connection {connection_id}")
        return self._json(request, {"closed": connection_id, "reason": "admin"})

    # -- certificates ----------------------------------------------------------------------

    def _reload_tls(self, request) -> bytes:
        reload = self.backend.reload_certificates
        outcome = reload() if reload is not None else {}
        return self._json(request, {"listeners": outcome})

    # -- quotas ----------------------------------------------------------------------------

    def _listener_names(self) -> list[str]:
        return list(self.backend.socket_server.listener_planes())

    def _quotas(self) -> dict:
        return quotas.describe(self.backend.dynamic_config.current, self._listener_names())

    async def _put_quotas(self, request) -> bytes:
        # The channel has refused a body over admin.rest.request.max.bytes and holds this one in memory.
        raw = request.content.read() if request.content is not None else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            raise HttpError(400, "BAD_REQUEST", f"the body is not JSON: {exc}") from None
        admin = self.backend.admin_manager
        try:
            updates = quotas.config_updates(body, self._listener_names())
            ip_updates = quotas.ip_rate_updates(body)
            for validate_only in (True, False):     # both changes are valid before either is made
                if updates:
                    await admin.alter_broker_configs(str(self.backend.broker_id),
                                                     lambda current: quotas.merged(current, updates),
                                                     validate_only=validate_only)
                if ip_updates:
                    await admin.alter_ip_connection_rates(ip_updates, validate_only=validate_only)
        except KafkaError as exc:
            raise HttpError(400, exc.code.name, exc.message or exc.code.name) from None
        return self._json(request, self._quotas())
