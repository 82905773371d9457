"""ApiHandler: what every API handler is, and what it may answer.

A handler serves one API key.  It is built with exactly the collaborators it
uses (the replica manager, the metadata cache, the admin manager, ...; the
broker's ``Authorization`` when it checks resources itself) and works from
the ``Request`` alone -- its ``RequestContext`` says who sent it
and how -- never from the connection.  ``handle`` returns one of:

* a response message (kafka-python's class of that API), encoded by
  ``KafkaApis`` at ``response_version(request)``;
* ``Encoded(chunks, errors)`` -- a response already encoded (ApiVersions
  and Metadata, from cached parts), with the error codes it carries
  (``{code: count}``, for ErrorsPerSec);
* ``NO_RESPONSE`` -- nothing is written (acks=0 Produce);
* ``CloseConnection(reason, message)`` -- nothing is answered and the
  connection is closed (an acks=0 Produce that failed: closing is how Kafka
  tells such a producer);
* ``Reply(response, update)`` -- a response plus connection state to keep
  (the SASL handshake and authentication outcomes).

Raising ``KafkaError(code, message)`` answers the whole request with
``error_response`` -- Kafka's ``getErrorResponse``.  Raising
``RefusedPeer(code, message, reason=...)`` does the same and then closes the
connection (the answer leaves first): the peer is not who it claims to be,
and every further try must cost it a new connection.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from twisted_kafka.network.request import ConnectionUpdate, Request
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .authorization import Authorization

if TYPE_CHECKING:
    from twisted_kafka.security.acl import AclOperation


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


#: The request is answered by silence (acks=0 Produce); the connection reads its next request.
NO_RESPONSE = _NoResponse()


@dataclass(frozen=True, slots=True)
class CloseConnection:
    """Answer by closing the connection (gracefully: earlier responses still leave)."""

    reason: str                 # a network.close_reasons.CloseReason value
    message: str


class RefusedPeer(KafkaError):
    """The whole request is answered with ``code``, then the connection is closed for ``reason`` (a
    ``CloseReason``), gracefully: the answer leaves first.  Whoever raises it has logged why."""

    def __init__(self, code: ErrorCode, message: str | None, *, reason: str):
        super().__init__(code, message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response already encoded (framed chunks), and the error codes it carries: ``{code: count}``,
    as Kafka's ``errorCounts`` (NONE included) -- what ErrorsPerSec counts, since the bytes are not
    walked again."""

    chunks: list
    errors: Mapping[int, int]


@dataclass(frozen=True, slots=True)
class Reply:
    """A response together with state the connection keeps afterwards."""

    response: Any
    update: ConnectionUpdate


class ApiHandler(ABC):
    """One API's handler; see the module docstring."""

    api_key: ClassVar[int]
    #: The operation on the cluster this API needs (Kafka's KafkaApis), checked by ``KafkaApis``
    #: with the broker's ``Authorization`` before ``handle`` runs: CLUSTER_AUTHORIZATION_FAILED for the
    #: whole request otherwise.
    cluster_operation: ClassVar[AclOperation | None] = None
    #: The operation on the request's ``group_id`` this API needs, checked the same way
    #: (GROUP_AUTHORIZATION_FAILED for the whole request otherwise).
    group_operation: ClassVar[AclOperation | None] = None
    #: Who decides what a request may do, for a handler that checks resources itself (per topic,
    #: per group): given to its constructor.
    authorization: Authorization

    @abstractmethod
    async def handle(self, request: Request) -> Any:
        """Serve ``request`` (see the module docstring for what may be returned)."""

    @abstractmethod
    def error_response(self, request: Request, error: ErrorCode, message: str | None = None) -> Any:
        """The response that answers the whole request with ``error`` (Kafka's getErrorResponse)."""

    def response_version(self, request: Request) -> int:
        """The version the response is encoded at: the request's, except where an API says otherwise."""
        return request.api_version


__all__ = ["ApiHandler", "NO_RESPONSE", "CloseConnection", "Encoded", "RefusedPeer", "Reply"]
