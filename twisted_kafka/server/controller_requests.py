"""Which controller requests this broker accepts: from the controller, meant for this broker.

LeaderAndIsr, UpdateMetadata and StopReplica decide what a broker hosts and
what it tells clients, so a broker applies one only when it comes from the
active controller and is meant for this broker -- this very process.  Before
anything of a request is applied, ``ControllerRequestGuard.check`` verifies,
in this order:

0. the principal, when an authorizer is configured
   (``authorizer.class.name``): the sender must be authorized CLUSTER_ACTION
   on the cluster -- as Kafka's ``KafkaApis`` requires for these APIs, so a
   super user passes -- or be this broker's own inter-broker principal, the
   one it presents on the listener the controller connects to
   (``control.plane.listener.name``, else ``inter.broker.listener.name``):
   with SSL asking for client certificates (``ssl.client.auth`` required or
   requested), its key store certificate's subject mapped by that listener's
   ``ssl.principal.mapping.rules``; with PLAINTEXT or
   ``ssl.client.auth=none``, ``User:ANONYMOUS``. The own principal passes
   because the ACLs reach a broker inside UpdateMetadata (tagged field 1004):
   before its first ACL set arrives the broker knows none, and the
   controller's request that carries them must not be refused for want of
   them. Otherwise CLUSTER_AUTHORIZATION_FAILED, logged with the principal and
   the peer. On a PLAINTEXT control plane (or SSL without client certificates)
   every client is ``User:ANONYMOUS``, the own principal, so this check does
   not tell them apart there: such a control plane relies on the broker epoch
   below and on network isolation, as Kafka's does. Without an authorizer
   there is no principal check.
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

In a cluster the controller a broker knows is ZooKeeper's ``/controller`` as
its watch last delivered it, and its epoch the czxid of its registration;
a new controller can be faster than the watch (it sends UpdateMetadata the
moment it is elected), and a re-registration's epoch reaches the controller
as soon as the znode exists.  So ``verify`` -- what the handlers call --
refreshes both (``refresh``: re-read ``/controller``, wait for a
registration in progress) and checks once more before refusing; nothing is
relaxed, the checks are only made against current facts.

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
from collections.abc import Awaitable, Callable

from twisted.logger import Logger

from twisted_kafka.network.request import ANONYMOUS, RequestContext
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.security.acl import AclOperation, ResourceType

from .authorization import ALLOW_ALL, Authorization

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

    def __init__(self, *, broker_id: int, cluster_id: str, broker_epoch: int,
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

    async def admit(self, body, context: RequestContext, *, api: str = "controller request") -> None:
        """Raise ``KafkaError`` unless the request may be applied: ``authorize`` the sender, then ``verify``."""
        source = f"{context.client_host}:{context.client_port} on listener {context.listener_name}"
        self.authorize(context, api=api, source=source)
        await self.verify(body, api=api, source=source)

    def authorize(self, context: RequestContext, *, api: str = "controller request", source: str = "?") -> None:
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
        self.log.warn("Refused {api} from principal {principal} at {source}: CLUSTER_AUTHORIZATION_FAILED: "
                      "not authorized CLUSTER_ACTION on the cluster, and not this broker's inter-broker principal",
                      api=api, principal=principal, source=source)
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         f"principal {principal} may not send controller requests")

    async def verify(self, body, *, api: str = "controller request", source: str = "?") -> None:
        """``check``, after refreshing what this broker knows (see the module docstring) when the
        request names another controller or a newer broker epoch than the ones known here."""
        if self._refresh is not None:
            try:
                self._check(body)
            except KafkaError as exc:
                newer_epoch = getattr(body, "broker_epoch", -1) > self.broker_epoch
                if exc.code == ErrorCode.STALE_CONTROLLER_EPOCH or (
                        exc.code == ErrorCode.STALE_BROKER_EPOCH and newer_epoch):
                    await self._refresh()
        self.check(body, api=api, source=source)

    def check(self, body, *, api: str = "controller request", source: str = "?") -> None:
        """Raise ``KafkaError`` unless ``body`` (a LeaderAndIsr, UpdateMetadata or StopReplica request)
        may be applied; if it may, its controller epoch becomes the one in force."""
        try:
            self._check(body)
        except KafkaError as exc:
            self.log.warn("Refused {api} from {source}: {code}: {message}", api=api, source=source,
                          code=exc.code.name, message=exc.message)
            raise

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
        if broker_epoch != self.broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"broker epoch {broker_epoch} is not this broker's current epoch")
        self.controller_epoch = body.controller_epoch


__all__ = ["ControllerRequestGuard", "new_broker_epoch", "BROKER_EPOCH_RANDOM_BITS"]
