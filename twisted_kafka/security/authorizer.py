"""The ACL authorizer: may this principal, from this host, perform this operation on this resource?

Kafka's ``AclAuthorizer`` (ZooKeeper mode) semantics, enabled by
``authorizer.class.name``:

* a principal listed in ``super.users`` may do everything;
* the ACLs that apply to a resource are the LITERAL ones on its name, the
  LITERAL ones on the wildcard ``*``, and the PREFIXED ones whose name is a
  prefix of its name;
* if none apply at all (to any principal), ``allow.everyone.if.no.acl.found``
  decides;
* otherwise a DENY for the principal (or ``User:*``), the host (or ``*``)
  and the operation (or ALL) refuses -- deny wins -- and else an ALLOW of
  the operation, of ALL, or of an operation implying it (READ, WRITE, DELETE
  and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) permits;
* nothing else is permitted.

The ACLs themselves are cluster metadata: the controller persists them and
sends them to every broker, whose authorizer holds the latest set
(``replace_all``).  Principals are ``<type>:<name>`` strings from the request
context, so an mTLS or SASL principal is checked exactly like ANONYMOUS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    allowing_operations,
)

#: Values of authorizer.class.name that enable the ACL authorizer: Kafka's ZooKeeper-mode and KRaft-mode
#: class names (either gives the same ACL semantics here) and this project's own.  The config's validator
#: (``twisted_kafka/config/broker.py``) accepts these and no other.
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "twisted_kafka.security.authorizer.AclAuthorizer",
)



#: Decisions remembered between ACL changes (the cache is emptied when full).
DECISION_CACHE_SIZE = 100_000

_ALLOWING = {operation: allowing_operations(operation) for operation in AclOperation}


class _TypeIndex:
    """One resource type's ACLs, indexed for ``matching``: literal names in a dict, prefixes by length."""

    __slots__ = ("literal", "prefixed", "prefix_lengths")

    def __init__(self, patterns: dict[ResourcePattern, frozenset]):
        self.literal = {p.name: tuple(e) for p, e in patterns.items() if p.pattern_type is PatternType.LITERAL}
        self.prefixed = {p.name: tuple(e) for p, e in patterns.items() if p.pattern_type is PatternType.PREFIXED}
        self.prefix_lengths = sorted({len(name) for name in self.prefixed})

    def matching(self, name: str) -> list[AccessControlEntry]:
        found: list[AccessControlEntry] = []
        found.extend(self.literal.get(name, ()))
        if name != WILDCARD_RESOURCE:
            found.extend(self.literal.get(WILDCARD_RESOURCE, ()))
        for length in self.prefix_lengths:
            if length > len(name):
                break
            found.extend(self.prefixed.get(name[:length], ()))
        return found


class AclAuthorizer:
    """The ACL set a broker holds, and the decisions made from it."""

    def __init__(self, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset] = {}
        self._by_type: dict[ResourceType, dict[ResourcePattern, frozenset]] = {}
        self._index: dict[ResourceType, _TypeIndex] = {}
        # Decisions since the ACLs last changed: a request checks the same few resources again and again.
        self._decisions: dict[tuple, bool] = {}

    @classmethod
    def from_config(cls, config) -> AclAuthorizer | None:
        """The authorizer ``authorizer.class.name`` names, or None (empty: no authorization)."""
        name = (config["authorizer.class.name"] or "").strip()
        if not name:
            return None
        assert name in AUTHORIZER_CLASS_NAMES      # the config's validator refused anything else
        super_users = [p.strip() for p in (config["super.users"] or "").split(";") if p.strip()]
        return cls(super_users=super_users,
                   allow_everyone_if_no_acl_found=config["allow.everyone.if.no.acl.found"])

    # -- the ACL set -------------------------------------------------------------------

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        """Hold exactly ``bindings`` from now on (the cluster's latest ACLs)."""
        acls: dict[ResourcePattern, set] = defaultdict(set)
        for binding in bindings:
            acls[binding.pattern].add(binding.entry)
        self._acls = {pattern: frozenset(entries) for pattern, entries in acls.items()}
        by_type: dict[ResourceType, dict[ResourcePattern, frozenset]] = defaultdict(dict)
        for pattern, entries in self._acls.items():
            by_type[pattern.resource_type][pattern] = entries
        self._by_type = dict(by_type)
        self._index = {resource_type: _TypeIndex(patterns) for resource_type, patterns in by_type.items()}
        self._decisions = {}

    def bindings(self) -> list[AclBinding]:
        return sorted(AclBinding(pattern, entry) for pattern, entries in self._acls.items() for entry in entries)

    def acls(self, selector: AclBindingFilter) -> list[AclBinding]:
        return [binding for binding in self.bindings() if selector.matches(binding)]

    # -- decisions ---------------------------------------------------------------------

    def matching_entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every ACL entry that applies to the literal resource ``name``."""
        index = self._index.get(resource_type)
        return index.matching(name) if index is not None else []

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether ``principal`` from ``host`` may perform ``operation`` on the resource; see the module docstring."""
        if principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            if len(self._decisions) >= DECISION_CACHE_SIZE:
                self._decisions.clear()
            decision = self._decisions[key] = self._decide(principal, host, operation, resource_type, name)
        return decision

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        entries = self.matching_entries(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        denying = (operation, AclOperation.ALL)
        allowing = _ALLOWING[operation]
        allowed = False
        for entry in entries:
            if entry.principal not in principals or entry.host not in hosts:
                continue
            if entry.permission is AclPermissionType.DENY:
                if entry.operation in denying:
                    return False
            elif entry.operation in allowing:
                allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether ``principal`` may perform ``operation`` on *some* resource of the type (Kafka's
        ``Authorizer.authorizeByResourceType``, KIP-679: InitProducerId without a transactional id is
        allowed with IDEMPOTENT_WRITE on the cluster or WRITE on any topic).

        A super user may, or -- through ``authorize`` on a name no ACL mentions -- anyone when no ACL
        applies and ``allow.everyone.if.no.acl.found`` is set.  Otherwise an ALLOW (of the operation
        or ALL, for the principal or ``User:*``, from the host or ``*``) counts unless a DENY covers
        its pattern: a LITERAL DENY of ``*`` covers everything, a LITERAL DENY the same name, a
        PREFIXED DENY every name or prefix it starts.
        """
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        allowed: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for pattern, entries in self._by_type.get(resource_type, {}).items():
            for entry in entries:
                if (entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (host, WILDCARD_HOST)
                        and entry.operation in (operation, AclOperation.ALL)):
                    (denied if entry.permission is AclPermissionType.DENY else allowed)[pattern.pattern_type].add(
                        pattern.name)
        if WILDCARD_RESOURCE in denied[PatternType.LITERAL]:
            return False
        if WILDCARD_RESOURCE in allowed[PatternType.LITERAL]:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in denied[PatternType.PREFIXED])

        return (any(name not in denied[PatternType.LITERAL] and not denied_by_prefix(name)
                    for name in allowed[PatternType.LITERAL])
                or any(not denied_by_prefix(name) for name in allowed[PatternType.PREFIXED]))


__all__ = ["AclAuthorizer", "AUTHORIZER_CLASS_NAMES"]
