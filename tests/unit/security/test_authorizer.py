"""The ACL authorizer's decisions, as Kafka's AclAuthorizer makes them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twisted_kafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from twisted_kafka.security.authorizer import AclAuthorizer

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name, operation=Op.WRITE, permission=ALLOW, principal=ALICE, host="*", resource_type=TOPIC,
        pattern=LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def authorizer(*bindings, **kwargs) -> AclAuthorizer:
    a = AclAuthorizer(**kwargs)
    a.replace_all(bindings)
    return a


def test_nothing_is_allowed_without_acls_by_default():
    assert not authorizer().authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_acls():
    a = authorizer(acl("t", principal=BOB), allow_everyone_if_no_acl_found=True)
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "other")
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")      # t has an ACL (for bob): no fallback


def test_super_users_may_do_everything():
    a = authorizer(acl("t", permission=DENY), super_users=[ALICE])
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.ALTER, CLUSTER, "kafka-cluster")
    assert not a.authorize(BOB, HOST, Op.WRITE, TOPIC, "t")


def test_literal_prefixed_and_wildcard_patterns():
    a = authorizer(acl("orders", pattern=LITERAL), acl("logs-", pattern=PREFIXED), acl("*", Op.READ))
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders-2")
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "logs-app")
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "logs-")
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "log")
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "anything")
    assert not a.authorize(ALICE, HOST, Op.READ, GROUP, "anything")     # resource types are separate


def test_deny_wins_over_allow():
    a = authorizer(acl("logs-", pattern=PREFIXED), acl("logs-secret", permission=DENY))
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "logs-app")
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "logs-secret")


def test_deny_of_all_denies_every_operation_and_wildcard_principal_matches_everyone():
    a = authorizer(acl("t", Op.ALL), acl("t", Op.ALL, DENY, principal="User:*", host="10.0.0.9"))
    assert a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.9", Op.READ, TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_describe_is_implied(granted):
    assert authorizer(acl("t", granted)).authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "t")


def test_describe_configs_is_implied_by_alter_configs_only():
    assert authorizer(acl("t", Op.ALTER_CONFIGS)).authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not authorizer(acl("t", Op.ALTER)).authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, TOPIC, "t")


def test_implication_does_not_go_the_other_way_and_deny_is_not_implied():
    assert not authorizer(acl("t", Op.DESCRIBE)).authorize(ALICE, HOST, Op.READ, TOPIC, "t")
    # A DENY of READ does not deny DESCRIBE (Kafka denies only the operation itself and ALL).
    a = authorizer(acl("t", Op.DESCRIBE), acl("t", Op.READ, DENY))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, TOPIC, "t")


def test_hosts_match_exactly_or_by_wildcard():
    a = authorizer(acl("t", host="10.0.0.1"))
    assert a.authorize(ALICE, "10.0.0.1", Op.WRITE, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.WRITE, TOPIC, "t")


def test_other_principals_are_not_matched():
    assert not authorizer(acl("t")).authorize(BOB, HOST, Op.WRITE, TOPIC, "t")


# -- properties ----------------------------------------------------------------------------

names = st.text(alphabet="ab-", min_size=1, max_size=4)
operations = st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER, Op.DELETE, Op.ALL])
principals = st.sampled_from([ALICE, BOB, "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
bindings = st.builds(lambda name, op, perm, who, host, pattern: acl(name, op, perm, who, host, TOPIC, pattern),
                     names, operations, st.sampled_from([ALLOW, DENY]), principals, hosts,
                     st.sampled_from([LITERAL, PREFIXED]))


def applies(binding: AclBinding, principal: str, host: str, name: str) -> bool:
    p, e = binding.pattern, binding.entry
    matches_name = p.name in (name, "*") if p.pattern_type is LITERAL else name.startswith(p.name)
    return matches_name and e.principal in (principal, "User:*") and e.host in (host, "*")


@given(st.lists(bindings, max_size=8), names, principals.filter(lambda p: p != "User:*"), hosts, operations)
def test_a_decision_follows_the_rules(acls, name, principal, host, operation):
    """Deny wins, an allow of the operation (or one implying it, or ALL) permits, nothing else does."""
    decision = authorizer(*acls).authorize(principal, host, operation, TOPIC, name)
    applying = [b.entry for b in acls if applies(b, principal, host, name)]
    denied = any(e.permission is DENY and e.operation in (operation, Op.ALL) for e in applying)
    implying = {operation, Op.ALL} | ({Op.READ, Op.WRITE, Op.DELETE, Op.ALTER} if operation is Op.DESCRIBE else set())
    allowed = any(e.permission is ALLOW and e.operation in implying for e in applying)
    assert decision == (allowed and not denied)


@given(st.lists(bindings, max_size=8), names, hosts, operations)
def test_adding_a_deny_never_grants_and_adding_an_allow_never_revokes(acls, name, host, operation):
    before = authorizer(*acls).authorize(ALICE, host, operation, TOPIC, name)
    assert not authorizer(*acls, acl(name, operation, DENY)).authorize(ALICE, host, operation, TOPIC, name)
    if before:
        assert authorizer(*acls, acl(name, operation, ALLOW)).authorize(ALICE, host, operation, TOPIC, name)


def test_authorize_by_resource_type():
    """KIP-679: some resource of the type, unless a DENY covers every allowed pattern."""
    by_type = AclAuthorizer.authorize_by_resource_type
    assert not by_type(authorizer(), ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(allow_everyone_if_no_acl_found=True), ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(super_users=[ALICE]), ALICE, HOST, Op.WRITE, TOPIC)
    assert by_type(authorizer(acl("t")), ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("t")), BOB, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("t"), acl("t", permission=DENY)), ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("t-1"), acl("t-", permission=DENY, pattern=PREFIXED)), ALICE, HOST, Op.WRITE,
                       TOPIC)
    assert by_type(authorizer(acl("u"), acl("t-", permission=DENY, pattern=PREFIXED)), ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("*"), acl("*", permission=DENY)), ALICE, HOST, Op.WRITE, TOPIC)
    assert not by_type(authorizer(acl("t", Op.READ)), ALICE, HOST, Op.WRITE, TOPIC)


def test_a_new_acl_set_replaces_remembered_decisions():
    a = authorizer(acl("t"))
    assert a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")
    a.replace_all([acl("t", permission=DENY)])
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")
    a.replace_all([])
    assert not a.authorize(ALICE, HOST, Op.WRITE, TOPIC, "t")
    assert a.matching_entries(TOPIC, "t") == []
