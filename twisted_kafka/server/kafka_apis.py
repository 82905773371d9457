"""KafkaApis: dispatch by api_key to the handler of each API, and turn failures into answers.

As in Kafka's ``KafkaApis.handle``, one table maps each served API to its
handler.  The table is also the truth about what the broker serves: the
Processor closes connections that use an API not in it, and ApiVersions
advertises exactly its keys with the registry's version ranges.

Every outcome of a handler becomes exactly one answer on the wire:

* a response object → encoded at the request's version;
* a list of byte chunks → already encoded by a hot-path encoder (Fetch, Metadata);
* ``NO_RESPONSE`` → nothing is written (acks=0 Produce) and the connection unmutes;
* ``KafkaError(code)`` → that API's error response with ``code``;
* any other exception → the error response with UNKNOWN_SERVER_ERROR, logged
  with the request, so a bug in one handler costs one request, not the broker.
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import Iterable, Protocol

from twisted.logger import Logger

from twisted_kafka.network.processor import CloseReason
from twisted_kafka.network.request import Request
from twisted_kafka.network.request_metrics import RequestMetrics
from twisted_kafka.protocol.codec import encode_response
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import REGISTRY, ApiSpec


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = _NoResponse()


class ApiHandler(Protocol):
    """What every API handler provides."""

    api_key: int

    async def handle(self, request: Request):
        """Serve ``request``: a response object, encoded chunks, or ``NO_RESPONSE``."""

    def error_response(self, request: Request, error: ErrorCode, message: str | None = None):
        """The response that answers the whole request with ``error`` (Kafka's getErrorResponse)."""

    def response_version(self, request: Request) -> int:
        """The version to encode the response at (normally the request's)."""


class KafkaApis:
    log = Logger(namespace="twisted_kafka.server.KafkaApis")

    def __init__(self, handlers: Iterable[ApiHandler], request_metrics: RequestMetrics | None = None):
        self._handlers: dict[int, ApiHandler] = {}
        self._specs: dict[int, ApiSpec] = {}
        for handler in handlers:
            self.register(handler)
        self.request_metrics = request_metrics

    def register(self, handler: ApiHandler) -> None:
        spec = REGISTRY.get(handler.api_key)
        if spec is None:
            raise ValueError(f"no registry entry for api_key {handler.api_key}")
        self._handlers[handler.api_key] = handler
        self._specs[handler.api_key] = spec

    def served_spec(self, api_key: int) -> ApiSpec | None:
        return self._specs.get(api_key)

    @property
    def served_keys(self) -> list[int]:
        return sorted(self._handlers)

    async def handle(self, request: Request) -> None:
        handler = self._handlers[request.api_key]
        try:
            result = await handler.handle(request)
        except KafkaError as exc:
            result = self._error_response(handler, request, exc.code, exc.message)
        except Exception:
            self.log.failure("Error handling {request}", request=request)
            result = self._error_response(handler, request, ErrorCode.UNKNOWN_SERVER_ERROR, None)
        request.remote_complete_ns = perf_counter_ns()
        if result is NO_RESPONSE:
            chunks = None
        elif isinstance(result, list):
            chunks = result
        else:
            try:
                chunks = encode_response(request.header, result, handler.response_version(request))
            except Exception:
                self.log.failure("Cannot encode the response to {request}; closing its connection",
                                 request=request)
                request.processor.close(CloseReason.PROTOCOL_ERROR, "response could not be encoded")
                chunks = None
        request.processor.channel.release(request)
        request.processor.send_response(request, chunks)

    def _error_response(self, handler: ApiHandler, request: Request, code: ErrorCode, message: str | None):
        if self.request_metrics is not None:
            self.request_metrics.record_error(request, code.name)
        try:
            return handler.error_response(request, code, message)
        except Exception:
            self.log.failure("Cannot build the {code} error response to {request}", code=code.name,
                             request=request)
            request.processor.close(CloseReason.PROTOCOL_ERROR, f"no error response could be built for {code.name}")
            return NO_RESPONSE
