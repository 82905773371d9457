"""The admin endpoint's ``twisted.web`` resource: routing, authentication, JSON in and out.

One leaf resource routes every path (the set is small and fixed, see
``ROUTES``), so authentication and errors are handled in one place:

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
from urllib.parse import unquote

from twisted.internet.defer import ensureDeferred
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from twisted_kafka.protocol.errors import KafkaError

from . import dashboard, openapi, prometheus, quotas, views

#: Largest request body accepted (a quotas document is a few hundred bytes).
MAX_BODY_BYTES = 64 * 1024


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


class AdminResource(Resource):
    isLeaf = True
    log = Logger(namespace="twisted_kafka.admin.AdminResource")

    def __init__(self, backend: AdminBackend, token: str | None):
        super().__init__()
        self.backend = backend
        self.token = token

    # -- dispatch -----------------------------------------------------------------------

    def render(self, request):
        path = "/" + "/".join(unquote(segment.decode("utf-8", "replace")) for segment in request.postpath)
        method = request.method.decode("ascii", "replace")
        try:
            handler = self._route(method, path, request)
            result = handler()
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

    def _route(self, method: str, path: str, request) -> Callable[[], Any]:
        path = path.rstrip("/") or "/"
        query = {key.decode(): values[0].decode("utf-8", "replace") for key, values in request.args.items()
                 if values}
        read: dict[str, Callable[[], Any]] = {
            "/": lambda: self._html(request, dashboard.PAGE),
            "/metrics": lambda: self._metrics(request),
            "/v1/openapi.json": lambda: self._json(request, openapi.document(self._listener_names())),
            "/v1/health/live": lambda: self._json(request, {"status": "live"}),
            "/v1/health/ready": lambda: self._ready(request),
            "/v1/connections": lambda: self._json(request, views.connections(
                self.backend.socket_server, listener=query.get("listener"), ip=query.get("ip"))),
            "/v1/connections/ips": lambda: self._json(request, views.ips(self.backend.socket_server,
                                                                          ip=query.get("ip"))),
            "/v1/connections/live": lambda: self._json(request, views.live(
                self.backend.socket_server, listener=query.get("listener"), ip=query.get("ip"))),
            "/v1/quotas": lambda: self._json(request, self._quotas()),
            "/v1/planes": lambda: self._json(request, views.planes(self.backend.socket_server,
                                                                    self.backend.metrics)),
        }
        if path == "/" and method in ("GET", "HEAD"):
            return read[path]     # the static dashboard page: its script sends the token
        if path.startswith("/v1/health/"):
            if path in read and method in ("GET", "HEAD"):
                return read[path]
            raise self._not_found_or_method(path, read)
        if path == "/v1/tls/reload":
            if method != "POST":
                self._authorize(request, mutating=False)
                raise HttpError(405, "METHOD_NOT_ALLOWED", f"only POST is allowed on {path}")
            self._authorize(request, mutating=True)
            return lambda: self._reload_tls(request)
        if path == "/v1/quotas" and method == "PUT":
            self._authorize(request, mutating=True)
            return lambda: self._put_quotas(request)
        prefix = "/v1/connections/"
        if method == "DELETE" and path.startswith(prefix) and path[len(prefix):] not in ("", "ips", "live"):
            self._authorize(request, mutating=True)
            return lambda: self._close(request, path[len(prefix):])
        if path in read and method in ("GET", "HEAD"):
            self._authorize(request, mutating=False)
            return read[path]
        if path in read or path.startswith(prefix):
            self._authorize(request, mutating=False)
            raise HttpError(405, "METHOD_NOT_ALLOWED", f"{method} is not allowed on {path}")
        raise HttpError(404, "NOT_FOUND", f"no such resource: {path}")

    @staticmethod
    def _not_found_or_method(path: str, read) -> HttpError:
        if path in read:
            return HttpError(405, "METHOD_NOT_ALLOWED", f"only GET is allowed on {path}")
        return HttpError(404, "NOT_FOUND", f"no such resource: {path}")

    def _authorize(self, request, *, mutating: bool) -> None:
        if self.token is None:
            if mutating:
                raise HttpError(401, "UNAUTHORIZED", "changes need admin.rest.auth.token, which is not set")
            return
        header = (request.getHeader("authorization") or "").strip()
        scheme, _, given = header.partition(" ")
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
            request.setHeader("www-authenticate", 'Bearer realm="twisted-kafka-admin"')
        return self._json(request, {"error_code": exc.code, "message": exc.message}, exc.status)

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
        raw = request.content.read(MAX_BODY_BYTES + 1) if request.content is not None else b""
        if len(raw) > MAX_BODY_BYTES:
            raise HttpError(413, "PAYLOAD_TOO_LARGE", f"the body is larger than {MAX_BODY_BYTES} bytes")
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
