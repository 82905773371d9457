"""Which controller requests this broker accepts: from the controller (or a broker), meant for this broker.

The controller APIs (``CONTROLLER_API_KEYS``) are exchanged between the
controller and brokers only: LeaderAndIsr, UpdateMetadata and StopReplica
(controller to broker) decide what a broker hosts and what it tells clients;
AlterPartition and ControlledShutdown (broker to controller) change a
partition's ISR and move leadership.  Every handler of them is a
``ControllerApiHandler``: before anything of a request is read or applied,

0. the principal is authorized, when an authorizer is configured
   (``authorizer.class.name``): the sender must be authorized CLUSTER_ACTION
   on the cluster -- as Kafka's ``KafkaApis`` and ``ControllerApis`` require
   for these APIs, so a super user passes -- or be this broker's own
   inter-broker principal, the one it presents on the listener the
   controller connects to (``control.plane.listener.name``, else
   ``inter.broker.listener.name``): with SSL asking for client certificates
   (``ssl.client.auth`` required or requested), its key store certificate's
   subject mapped by that listener's ``ssl.principal.mapping.rules``; with
   PLAINTEXT or ``ssl.client.auth=none``, ``User:ANONYMOUS``. The own
   principal passes because the ACLs reach a broker inside UpdateMetadata
   (tagged field 1004): before its first ACL set arrives the broker knows
   none, and the controller's request that carries them must not be refused
   for want of them; in a cluster the brokers share that principal (their
   certificates map to one), so it is also how they reach the controller.
   Otherwise CLUSTER_AUTHORIZATION_FAILED. On a PLAINTEXT control plane (or
   SSL without client certificates) every client is ``User:ANONYMOUS``, the
   own principal, so this check does not tell them apart there: such a
   control plane relies on the broker epoch below and on network isolation,
   as Kafka's does. Without an authorizer there is no principal check.

Then LeaderAndIsr, UpdateMetadata and StopReplica are checked by
``ControllerRequestGuard.verify``, in this order:

1. the target: the request's ``BrokerId`` and ``ClusterId`` (this project's
   tagged fields 1002 and 1003) are this broker's id and cluster id --
   otherwise INVALID_REQUEST (another broker id) or INCONSISTENT_CLUSTER_ID
   (another cluster; Kafka's error for a cluster id that does not match the
   receiver's).  Absent fields (-1 / null: a controller that does not send
   them) are not checked; this project's controller always sends them.
2. the sender: ``controller_id`` is the controller this broker knows (a
   single node is its own controller; in a cluster, the broker id in
   ZooKeeper's ``/controller``) -- otherwise STALE_CONTROLLER_EPOCH, Kafka's
   ``ControllerMovedException``: "The controller moved to another broker".
3. the controller epoch is not older than the newest one accepted --
   otherwise STALE_CONTROLLER_EPOCH, as Kafka's ReplicaManager answers.
4. the broker epoch (KIP-380) is this broker's current epoch -- otherwise
   STALE_BROKER_EPOCH.  Kafka refuses only an epoch older than the current
   one (a ZooKeeper controller may learn a broker's new epoch before the
   broker does); here the controller always learns it from the broker's
   registration before sending anything, so any other value is refused --
   "no epoch" (-1), a guess, one of a previous run.

AlterPartition and ControlledShutdown name the sending broker and its epoch,
which the controller checks against the registrations it holds
(STALE_BROKER_EPOCH, or BROKER_NOT_AVAILABLE for a broker id it does not
know).

A refusal for any of these reasons (``REFUSALS``) says the sender is not who
it claims to be: it is answered with the error, logged once (peer,
principal, API, reason), and the connection is closed after the answer
(``RefusedPeer``, close reason ``controller_refused``) -- so guessing a
broker epoch costs a connection (a TLS handshake on an mTLS control plane)
per try, and a real controller or broker that was refused simply reconnects
(its request was answered; the next one goes on a new connection).

In a cluster the controller a broker knows is ZooKeeper's ``/controller`` as
its watch last delivered it, and its epoch the czxid of its registration;
a new controller can be faster than the watch (it sends UpdateMetadata the
moment it is elected), and a re-registration's epoch reaches the controller
as soon as the znode exists.  So ``verify`` refreshes both (``refresh``:
re-read ``/controller``, wait for a registration in progress) and checks
once more before refusing; nothing is relaxed, the checks are only made
against current facts.

Only a request that passes every check moves the stored controller epoch, so
a forged request can neither take leadership away nor lock the real
controller out.  The broker epoch is what a client cannot know: it is drawn
by ``new_broker_epoch`` -- growing across restarts, with random low bits.
Versions of these APIs without a broker epoch are not served at all (see
``protocol/registry.py``).
"""

from __future__ import annotations

import secrets
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.logger import Logger

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.request import ANONYMOUS, Request, RequestContext
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.security.acl import AclOperation, ResourceType

from .api_handler import ApiHandler, RefusedPeer
from .authorization import ALLOW_ALL, Authorization
from .broker_epoch import BrokerEpoch

#: A controller API's whole-request errors that say its sender is not who it claims to be: not
#: authorized, not the controller this broker knows (or an older one), not meant for this broker or
#: cluster, not this broker's epoch -- or, at the controller, a broker id or epoch it does not know.
REFUSALS = frozenset({
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST, ErrorCode.INCONSISTENT_CLUSTER_ID,
    ErrorCode.STALE_CONTROLLER_EPOCH, ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_NOT_AVAILABLE,
})

#: Random low bits of a broker epoch.
BROKER_EPOCH_RANDOM_BITS = 25
#: Milliseconds per step of a broker epoch's time part: a broker cannot restart faster.
BROKER_EPOCH_TIME_UNIT_MS = 16


def new_broker_epoch(now_ms: int | None = None, random_bits: int | None = None) -> int:
    """A broker epoch for this run: grows across restarts, and cannot be guessed.

    The high bits count 16 ms steps of the wall clock (so a later run of the
    broker has a larger epoch, as ZooKeeper's session ids make Kafka's
    grow); the low 25 bits are random, so a client that knows when the
    broker started still cannot name its epoch.  Positive int64 until 2109.
    """
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    if random_bits is None:
        random_bits = secrets.randbits(BROKER_EPOCH_RANDOM_BITS)
    return ((now_ms // BROKER_EPOCH_TIME_UNIT_MS) << BROKER_EPOCH_RANDOM_BITS) | random_bits


class ControllerRequestGuard:
    """The checks of the module docstring, and the controller epoch in force on this broker."""

    log = Logger(namespace="twisted_kafka.server.ControllerRequestGuard")

    def __init__(self, *, broker_id: int, cluster_id: str, broker_epoch: BrokerEpoch,
                 known_controller: Callable[[], int | None],
                 refresh: Callable[[], Awaitable[None]] | None = None,
                 authorization: Authorization = ALLOW_ALL,
                 own_principal: Callable[[], str | None] = lambda: ANONYMOUS):
        self.broker_id = broker_id
        self.authorization = authorization
        self._own_principal = own_principal
        self.cluster_id = cluster_id
        self.broker_epoch = broker_epoch
        self._known_controller = known_controller
        self._refresh = refresh
        self.controller_epoch = -1    # the newest controller epoch accepted

    def authorize(self, context: RequestContext) -> None:
        """Check 0 of the module docstring: CLUSTER_AUTHORIZATION_FAILED unless the sender's principal is
        authorized CLUSTER_ACTION on the cluster (super users are) or is this broker's own inter-broker
        principal.  Nothing to check without an authorizer."""
        if not self.authorization.enabled:
            return
        principal = context.principal
        if principal == self._own_principal():
            return
        if self.authorization.allowed(context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         f"principal {principal} is not authorized CLUSTER_ACTION on the cluster and is not "
                         "this broker's inter-broker principal")

    def refused(self, request: Request, exc: KafkaError) -> RefusedPeer:
        """The one log line of a refusal (``REFUSALS``), and what closes the connection after its answer."""
        context = request.context
        api = f"{request.spec.name} v{request.api_version}" if request.spec is not None else f"ApiKey{request.api_key}"
        self.log.warn("Refused {api} from principal {principal} at {source}: {code}: {message}; closing the "
                      "connection", api=api, principal=context.principal,
                      source=f"{context.client_address} on listener {context.listener_name}",
                      code=exc.code.name, message=exc.message)
        return RefusedPeer(exc.code, exc.message, reason=CloseReason.CONTROLLER_REFUSED)

    async def verify(self, body) -> None:
        """``check``, after refreshing what this broker knows (see the module docstring) when the
        request names another controller or a newer broker epoch than the ones known here."""
        if self._refresh is not None:
            try:
                self._check(body)
            except KafkaError as exc:
                newer_epoch = getattr(body, "broker_epoch", -1) > self.broker_epoch.current
                if exc.code == ErrorCode.STALE_CONTROLLER_EPOCH or (
                        exc.code == ErrorCode.STALE_BROKER_EPOCH and newer_epoch):
                    await self._refresh()
        self.check(body)

    def check(self, body) -> None:
        """Raise ``KafkaError`` unless ``body`` (a LeaderAndIsr, UpdateMetadata or StopReplica request)
        may be applied; if it may, its controller epoch becomes the one in force."""
        self._check(body)

    def _check(self, body) -> None:
        target = getattr(body, "broker_id", -1)
        cluster = getattr(body, "cluster_id", None)
        if cluster is not None and cluster != self.cluster_id:
            raise KafkaError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                             f"the request is for cluster {cluster}, this broker belongs to {self.cluster_id}")
        if target != -1 and target != self.broker_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"the request is for broker {target}, this is broker {self.broker_id}")
        controller = self._known_controller()
        if controller is None or body.controller_id != controller:
            raise KafkaError(ErrorCode.STALE_CONTROLLER_EPOCH,
                             f"broker {body.controller_id} is not the controller "
                             f"({'none known' if controller is None else f'the controller is broker {controller}'})")
        if body.controller_epoch < self.controller_epoch:
            raise KafkaError(ErrorCode.STALE_CONTROLLER_EPOCH,
                             f"controller epoch {body.controller_epoch} is older than {self.controller_epoch}")
        broker_epoch = getattr(body, "broker_epoch", -1)
        if broker_epoch != self.broker_epoch.current:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"broker epoch {broker_epoch} is not this broker's current epoch")
        self.controller_epoch = body.controller_epoch


class ControllerApiHandler(ApiHandler):
    """The handler of a controller API (see the module docstring): the principal is authorized before
    ``serve`` runs, and a refusal in ``REFUSALS`` -- by the guard, by ``serve``'s own checks or by the
    controller it asks -- is logged once and closes the connection after its answer."""

    guard: ControllerRequestGuard

    async def handle(self, request: Request) -> Any:
        try:
            self.guard.authorize(request.context)
            return await self.serve(request)
        except KafkaError as exc:
            if exc.code in REFUSALS and not isinstance(exc, RefusedPeer):
                raise self.guard.refused(request, exc) from None
            raise

    @abstractmethod
    async def serve(self, request: Request) -> Any:
        """Serve a request whose sender is authorized (what ``ApiHandler.handle`` would do)."""


__all__ = ["ControllerRequestGuard", "ControllerApiHandler", "REFUSALS", "new_broker_epoch",
           "BROKER_EPOCH_RANDOM_BITS"]
