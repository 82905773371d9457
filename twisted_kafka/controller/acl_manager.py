"""AclManager: the cluster's ACLs, written by the controller and sent to every broker.

Kafka's ZooKeeper-mode ``AclAuthorizer`` writes ACLs to ``/kafka-acl`` (and
``/kafka-acl-extended``) from whichever broker took CreateAcls /
DeleteAcls, and every broker's authorizer reloads them on a change
notification.  Here the controller writes them (``create_acls``,
``delete_acls``: a broker forwards those requests to it) and sends every
broker the whole set in UpdateMetadata (this project's tagged field), which
each broker's authorizer then uses; ACLs written to ZooKeeper by another
tool arrive through the controller's watch (``acls_changed``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.security.acl import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern

from .broker_request_batch import ControllerBrokerRequestBatch, Sent
from .context import LOG_NAMESPACE, ControllerContext
from .event_manager import ControllerEventManager
from .metadata_store import ClusterMetadataStore


class AclManager:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, context: ControllerContext, store: ClusterMetadataStore,
                 persist: Callable[[Awaitable], Awaitable[None]], requests: ControllerBrokerRequestBatch,
                 events: ControllerEventManager):
        self._context = context
        self._store = store
        self._persist = persist
        self._requests = requests
        self._events = events

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """Add ``bindings``; per binding NONE or INVALID_REQUEST with Kafka's message.  Every broker
        holds the new ACL set when this returns."""
        self._events.require_active()
        results: list[tuple[ErrorCode, str | None]] = []
        async with self._events.lock:
            acls = self._context.acls
            added: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for binding in bindings:
                reason = binding.invalid_reason()
                if reason is not None:
                    results.append((ErrorCode.INVALID_REQUEST, reason))
                    continue
                added.setdefault(binding.pattern, set()).add(binding.entry)
                results.append((ErrorCode.NONE, None))
            for pattern, entries in sorted(added.items()):
                new = acls.get(pattern, frozenset()) | entries
                if new != acls.get(pattern):
                    await self._persist(self._store.set_acls(pattern, new))
                    acls[pattern] = new
            propagated = self._acls_changed().all() if added else None
        if propagated is not None:
            await propagated
        return results

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every binding each filter matches; per filter the bindings it removed."""
        self._events.require_active()
        async with self._events.lock:
            acls = self._context.acls
            deleted: list[list[AclBinding]] = []
            doomed: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for selector in filters:
                matched = [AclBinding(p, e) for p, entries in sorted(acls.items()) for e in sorted(entries)
                           if selector.matches_pattern(p) and selector.matches_entry(e)]
                deleted.append(matched)
                for binding in matched:
                    doomed.setdefault(binding.pattern, set()).add(binding.entry)
            for pattern, entries in sorted(doomed.items()):
                remaining = acls[pattern] - entries
                await self._persist(self._store.set_acls(pattern, remaining))
                if remaining:
                    acls[pattern] = remaining
                else:
                    del acls[pattern]
            propagated = self._acls_changed().all() if doomed else None
        if propagated is not None:
            await propagated
        return deleted

    async def acls_changed(self) -> None:
        """ACLs written by another broker or tool (a cluster's ACL change notifications): reload them, and
        send them to brokers if they differ from what the controller holds."""
        acls = await self._store.load_acls()
        if acls != self._context.acls:
            self._context.acls = acls
            self._acls_changed()

    def _acls_changed(self) -> Sent:
        acls = self._context.acls
        self.log.info("ACLs changed: {n} binding(s) on {r} resource pattern(s)",
                      n=sum(len(e) for e in acls.values()), r=len(acls))
        return self._requests.send_update_metadata(list(self._context.live_brokers), [], acls=True)


__all__ = ["AclManager"]
