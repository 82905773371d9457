"""ACL bindings and filters: Kafka's validation, filter matching and ZooKeeper JSON."""

from __future__ import annotations

import json

import pytest

from twisted_kafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    entries_from_json,
    entries_json,
)
from twisted_kafka.zk import data as z

T, L, P = ResourceType.TOPIC, PatternType.LITERAL, PatternType.PREFIXED


def binding(name="t", pattern=L, resource_type=T, principal="User:alice", host="*", op=AclOperation.READ,
            perm=AclPermissionType.ALLOW):
    return AclBinding(ResourcePattern(resource_type, name, pattern), AccessControlEntry(principal, host, op, perm))


@pytest.mark.parametrize("bad, reason", [
    (binding(pattern=PatternType.MATCH), "Invalid ACL creation"),
    (binding(op=AclOperation.ANY), "Invalid ACL creation"),
    (binding(perm=AclPermissionType.ANY), "Invalid ACL creation"),
    (binding(resource_type=ResourceType.ANY), "Invalid ACL creation"),
    (binding(name="my-cluster", resource_type=ResourceType.CLUSTER),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (binding(name=""), "Invalid empty resource name specified"),
    (binding(principal="alice"), "Invalid principal"),
])
def test_invalid_bindings_are_refused_with_kafkas_reason(bad, reason):
    assert reason in bad.invalid_reason()


def test_unknown_wire_ids_become_unknown():
    b = AclBinding.of(99, "t", 3, "User:a", "*", 3, 3)
    assert b.pattern.resource_type is ResourceType.UNKNOWN and b.invalid_reason()


def f(resource_type=ResourceType.ANY, name=None, pattern=PatternType.ANY, principal=None, host=None,
      op=AclOperation.ANY, perm=AclPermissionType.ANY):
    return AclBindingFilter(resource_type, name, pattern, principal, host, op, perm)


def test_filters_match_as_kafkas():
    literal, prefixed, wildcard = binding("orders"), binding("ord", P), binding("*")
    assert all(f().matches(b) for b in (literal, prefixed, wildcard))
    assert f(name="orders").matches(literal) and not f(name="orders").matches(prefixed)
    match = f(name="orders", pattern=PatternType.MATCH)
    assert match.matches(literal) and match.matches(prefixed) and match.matches(wildcard)
    assert not match.matches(binding("order-2"))
    assert f(pattern=P).matches(prefixed) and not f(pattern=P).matches(literal)
    assert not f(resource_type=ResourceType.GROUP).matches(literal)
    assert f(principal="User:alice", op=AclOperation.READ, perm=AclPermissionType.ALLOW).matches(literal)
    assert not f(host="10.0.0.1").matches(literal)
    assert f(op=AclOperation.UNKNOWN).invalid_reason()


def test_zookeeper_json_is_kafkas():
    entries = {AccessControlEntry("User:alice", "*", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.DENY)}
    data = entries_json(entries)
    assert data == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Deny",
                                            "operation": "IdempotentWrite", "host": "*"}]}
    assert entries_from_json(json.loads(json.dumps(data))) == entries
    assert ResourceType.TRANSACTIONAL_ID.camel == "TransactionalId"
    assert z.acl_root("LITERAL") == "/kafka-acl" and z.acl_root("PREFIXED") == "/kafka-acl-extended/prefixed"
    assert z.encode_acl_change("TOPIC", "t", "LITERAL") == ("/kafka-acl-changes/acl_changes_", b"TOPIC:t")
    path, payload = z.encode_acl_change("TOPIC", "t-", "PREFIXED")
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(payload) == {"version": 1, "resourceType": "TOPIC", "name": "t-", "patternType": "PREFIXED"}
