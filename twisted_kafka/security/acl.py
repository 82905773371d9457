"""ACL bindings and filters, with Kafka's ids, names and matching rules.

An ACL binding is a resource pattern (resource type, name, pattern type)
plus an access control entry (principal, host, operation, permission), as
in ``org.apache.kafka.common.acl.AclBinding``.  The enum values are the
ids the CreateAcls / DescribeAcls / DeleteAcls messages carry; the names
are the ones Kafka writes into ZooKeeper (``SecurityUtils.resourceTypeName``,
``operationName``, ``permissionTypeName``: upper camel case).

Filters (DescribeAcls, DeleteAcls) follow ``ResourcePatternFilter`` and
``AccessControlEntryFilter``: ANY and null match everything, and the MATCH
pattern type matches every pattern that would apply to a literal name --
the literal name itself, the wildcard ``*`` and every prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


class _Named(IntEnum):
    @property
    def camel(self) -> str:
        """The name Kafka stores in ZooKeeper (``Topic``, ``IdempotentWrite``, ``Allow``)."""
        return _camel(self.name)

    @classmethod
    def from_camel(cls, text: str):
        for member in cls:
            if member.camel.lower() == text.replace("_", "").lower():
                return member
        raise ValueError(f"no {cls.__name__} named {text!r}")


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: Concrete values: what a binding (as opposed to a filter) may hold.
CONCRETE_RESOURCE_TYPES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
CONCRETE_PATTERN_TYPES = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
CONCRETE_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
CONCRETE_PERMISSIONS = frozenset({AclPermissionType.ALLOW, AclPermissionType.DENY})


def _enum(cls, value: int):
    """``cls(value)``, or UNKNOWN for an id this broker does not know (as Kafka's ``fromCode``)."""
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, " \
               f"patternType={self.pattern_type.name})"


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def of(cls, resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
           permission: int) -> AclBinding:
        """A binding from wire ids (unknown ids become UNKNOWN, which ``invalid_reason`` reports)."""
        return cls(ResourcePattern(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type)),
                   AccessControlEntry(principal, host, _enum(AclOperation, operation),
                                      _enum(AclPermissionType, permission)))

    def invalid_reason(self) -> str | None:
        """Why CreateAcls refuses this binding (INVALID_REQUEST), or None; Kafka's checks and messages."""
        p, e = self.pattern, self.entry
        if (p.resource_type not in CONCRETE_RESOURCE_TYPES or p.pattern_type not in CONCRETE_PATTERN_TYPES
                or e.operation not in CONCRETE_OPERATIONS or e.permission not in CONCRETE_PERMISSIONS):
            return "Invalid ACL creation: " + describe(self)
        if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not p.name:
            return "Invalid empty resource name specified"
        if not valid_principal(e.principal):
            return f"Invalid principal: {e.principal!r} (expected <type>:<name>, e.g. User:alice)"
        if e.host is None:
            return "Invalid null host"
        return None


def valid_principal(principal: str | None) -> bool:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: ``<type>:<name>`` with a non-empty type and name."""
    if not principal or ":" not in principal:
        return False
    kind, name = principal.split(":", 1)
    return bool(kind) and bool(name)


def describe(binding: AclBinding) -> str:
    e = binding.entry
    return (f"(pattern={binding.pattern}, entry=(principal={e.principal}, host={e.host}, "
            f"operation={e.operation.name}, permissionType={e.permission.name}))")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select; ``None`` strings and ANY values match everything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
           operation: int, permission: int) -> AclBindingFilter:
        return cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type), principal, host,
                   _enum(AclOperation, operation), _enum(AclPermissionType, permission))

    def invalid_reason(self) -> str | None:
        """Kafka refuses a filter holding an UNKNOWN value (INVALID_REQUEST)."""
        if ResourceType.UNKNOWN in (self.resource_type,) or self.pattern_type is PatternType.UNKNOWN \
                or self.operation is AclOperation.UNKNOWN or self.permission is AclPermissionType.UNKNOWN:
            return "The filter contains an UNKNOWN element"
        return None

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        if self.name is None:
            return self.pattern_type in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type)
        if self.pattern_type is PatternType.ANY:
            return self.name == pattern.name
        if self.pattern_type is PatternType.MATCH:
            if pattern.pattern_type is PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD_RESOURCE)
            return pattern.pattern_type is PatternType.PREFIXED and self.name.startswith(pattern.name)
        return self.pattern_type is pattern.pattern_type and self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation is AclOperation.ANY or self.operation is entry.operation)
                and (self.permission is AclPermissionType.ANY or self.permission is entry.permission))


#: Operations an ALLOW of another operation implies (Kafka's ``AclAuthorizer``/``StandardAuthorizerData``):
#: whoever may read, write, delete or alter a resource may describe it; whoever may alter configs may
#: describe them.  ALL implies everything; a DENY never implies anything but itself and ALL.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def allowing_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The ACL operations whose ALLOW permits ``operation``."""
    return IMPLIED_BY.get(operation, frozenset({operation})) | {AclOperation.ALL}


# -- Kafka's ZooKeeper encoding of a resource's ACLs -----------------------------------

ACL_JSON_VERSION = 1


def entries_json(entries) -> dict:
    """``{"version": 1, "acls": [...]}`` -- the data of ``/kafka-acl/<Type>/<name>`` (Kafka's ``AclEntry``)."""
    return {"version": ACL_JSON_VERSION,
            "acls": [{"principal": e.principal, "permissionType": e.permission.camel,
                      "operation": e.operation.camel, "host": e.host} for e in sorted(entries)]}


def entries_from_json(data: dict) -> set[AccessControlEntry]:
    if data.get("version") != ACL_JSON_VERSION:
        raise ValueError(f"unsupported ACL JSON version {data.get('version')!r}")
    return {AccessControlEntry(item["principal"], item["host"], AclOperation.from_camel(item["operation"]),
                               AclPermissionType.from_camel(item["permissionType"]))
            for item in data["acls"]}


__all__ = ["ResourceType", "PatternType", "AclOperation", "AclPermissionType", "ResourcePattern",
           "AccessControlEntry", "AclBinding", "AclBindingFilter", "allowing_operations", "entries_json",
           "entries_from_json", "WILDCARD_RESOURCE", "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "CLUSTER_NAME",
           "valid_principal", "describe"]
