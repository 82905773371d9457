"""KafkaApis: dispatch by api_key to the handler of each API, and turn every outcome into an answer.

As in Kafka's ``KafkaApis.handle``, one table maps each served API to its
handler.  The table is also the truth about what the broker serves: a plane
serves (and ApiVersions advertises) exactly the keys that have handlers,
with the registry's version ranges, filtered by what that plane carries.

Every outcome of a handler becomes exactly one of Kafka's response kinds,
which the handler pool hands to its plane's ``RequestChannel``:

* a response object → ``SendResponse`` encoded at the handler's response version,
  after marking ErrorsPerSec once per error code it carries (Kafka's
  ``errorCounts``, NONE included);
* ``Encoded`` chunks → ``SendResponse`` as is (ApiVersions, Metadata), marking
  ErrorsPerSec with the error codes the handler says they carry;
* ``NO_RESPONSE`` → ``NoOpResponse`` (acks=0 Produce);
* ``CloseConnection`` → ``CloseConnectionResponse``;
* ``Reply`` → its response, with the connection update attached;
* ``KafkaError(code)`` → that API's error response with ``code`` (also an
  authorization check the handler declares -- ``cluster_operation``,
  ``group_operation`` -- refused before the handler runs);
* ``RefusedPeer(code, reason=...)`` → ``CloseConnectionResponse`` carrying that
  error response: it is written, then the connection is closed;
* any other exception → the error response with UNKNOWN_SERVER_ERROR, logged
  with the request, so a bug in one handler costs one request, not the broker;
* a response that cannot be encoded → ``CloseConnectionResponse``.

``error_answer`` builds the same error response for a request whose handler
has not finished when the broker stops (the handler pool expires it); if
that handler fails afterwards (what it waited on was closed by the stop),
one line says so, without a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from time import perf_counter_ns

from twisted.logger import Logger

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.request import (
    CloseConnectionResponse,
    ConnectionUpdate,
    NoOpResponse,
    Request,
    Response,
    SendResponse,
)
from twisted_kafka.network.request_metrics import RequestMetrics
from twisted_kafka.protocol.codec import encode_response
from twisted_kafka.protocol.error_counts import error_counts
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import CONTROLLER_API_KEYS, REGISTRY, ApiSpec
from twisted_kafka.security.acl import ResourceType

from .api_handler import NO_RESPONSE, ApiHandler, CloseConnection, Encoded, RefusedPeer, Reply
from .authorization import Authorization
from .controller_requests import ControllerApiHandler


class KafkaApis:
    log = Logger(namespace="twisted_kafka.server.KafkaApis")

    def __init__(self, handlers: Iterable[ApiHandler], *, authorization: Authorization,
                 request_metrics: RequestMetrics | None = None):
        """``authorization`` checks what an API declares for the whole request (``cluster_operation``,
        ``group_operation``); ``request_metrics`` counts the error codes of every answer (ErrorsPerSec)."""
        self._handlers: dict[int, ApiHandler] = {}
        self._specs: dict[int, ApiSpec] = {}
        for handler in handlers:
            self._register(handler)
        self.authorization = authorization
        self.request_metrics = request_metrics

    def _register(self, handler: ApiHandler) -> None:
        spec = REGISTRY.get(handler.api_key)
        if spec is None:
            raise ValueError(f"no registry entry for api_key {handler.api_key}")
        if handler.api_key in CONTROLLER_API_KEYS and not isinstance(handler, ControllerApiHandler):
            # The one place the controller APIs' senders are authorized: no such handler goes without it.
            raise TypeError(f"{type(handler).__name__} serves controller API {spec.name}: it must be a "
                            "ControllerApiHandler")
        self._handlers[handler.api_key] = handler
        self._specs[handler.api_key] = spec

    def served_spec(self, api_key: int) -> ApiSpec | None:
        return self._specs.get(api_key)

    @property
    def served_keys(self) -> list[int]:
        return sorted(self._handlers)

    async def handle(self, request: Request) -> Response:
        """Serve ``request``; the answer for its plane's RequestChannel."""
        handler = self._handlers[request.api_key]
        close_reason: str | None = None
        try:
            self._authorize(handler, request)
            result = await handler.handle(request)
        except KafkaError as exc:
            result = self._error_response(handler, request, exc.code, exc.message)
            if isinstance(exc, RefusedPeer):
                close_reason = exc.reason
        except Exception as exc:
            if request.released:
                # Expired at shutdown and answered then (error_answer); what it still waited on was
                # closed by the stop (a controller channel, say): no one hears of it but the log.
                self.log.info("{request}, expired earlier, ended with {error!r}", request=request, error=exc)
                return NoOpResponse(request)
            self.log.failure("Error handling {request}", request=request)
            result = self._error_response(handler, request, ErrorCode.UNKNOWN_SERVER_ERROR, None)
        request.remote_complete_ns = perf_counter_ns()
        response = self._response(handler, request, result)
        if close_reason is not None and isinstance(response, SendResponse):
            # The refusal is answered, then the connection closes; the refusal was logged where it was decided.
            return CloseConnectionResponse(request, close_reason, None, graceful=True, chunks=response.chunks)
        return response

    def error_answer(self, request: Request, code: ErrorCode, message: str | None = None) -> Response:
        """``request`` answered with ``code`` as a whole, in its API's error response (a request expired
        before its handler finished: ``KafkaRequestHandlerPool.expire_in_flight``)."""
        handler = self._handlers[request.api_key]
        request.remote_complete_ns = perf_counter_ns()
        return self._response(handler, request, self._error_response(handler, request, code, message))

    def _authorize(self, handler: ApiHandler, request: Request) -> None:
        """The whole-request checks an API declares (Kafka's KafkaApis): on the cluster, on its group."""
        auth = self.authorization
        if not auth.enabled:
            return
        if handler.cluster_operation is not None:
            auth.require(request.context, handler.cluster_operation, ResourceType.CLUSTER)
        if handler.group_operation is not None:
            group_id = getattr(request.body, "group_id", None)
            if group_id is not None:
                auth.require(request.context, handler.group_operation, ResourceType.GROUP, group_id)

    def _response(self, handler: ApiHandler, request: Request, result) -> Response:
        update: ConnectionUpdate | None = None
        if isinstance(result, Reply):
            result, update = result.response, result.update
        if result is NO_RESPONSE:
            return NoOpResponse(request, update)
        if isinstance(result, CloseConnection):
            return CloseConnectionResponse(request, result.reason, result.message)
        version = handler.response_version(request)
        if self.request_metrics is not None:
            try:
                counts = result.errors if isinstance(result, Encoded) else error_counts(result, version)
                self.request_metrics.record_errors(request, counts)
            except Exception:      # a metric is never worth a response
                self.log.failure("Cannot count the error codes of the response to {request}", request=request)
        if isinstance(result, Encoded):
            return SendResponse(request, result.chunks, update)
        try:
            chunks = encode_response(request.header, result, version)
        except Exception:
            self.log.failure("Cannot encode the response to {request}; closing its connection", request=request)
            return CloseConnectionResponse(request, CloseReason.PROTOCOL_ERROR, "response could not be encoded",
                                           graceful=False)
        return SendResponse(request, chunks, update)

    def _error_response(self, handler: ApiHandler, request: Request, code: ErrorCode, message: str | None):
        try:
            return handler.error_response(request, code, message)
        except Exception:
            self.log.failure("Cannot build the {code} error response to {request}", code=code.name,
                             request=request)
            if self.request_metrics is not None:    # no response carries it: counted here
                self.request_metrics.record_errors(request, {code: 1})
            return CloseConnection(CloseReason.PROTOCOL_ERROR, f"no error response could be built for {code.name}")
