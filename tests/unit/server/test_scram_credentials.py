"""Describe/AlterUserScramCredentials through KafkaApis: Kafka's per-user errors and all-or-nothing users."""

from __future__ import annotations

import pytest

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import Broker

SHA256, SHA512 = 1, 2
SALTED = b"\x01" * 32


def upsert(name, mechanism=SHA256, iterations=4096):
    return (name, mechanism, iterations, b"salt", SALTED)


@pytest.fixture
def node(tmp_path):
    return Broker(tmp_path)


def alter(node, deletions=(), upsertions=()):
    response = node.call(m.AlterUserScramCredentialsRequest(deletions=list(deletions), upsertions=list(upsertions)),
                         0)
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def describe(node, users=None):
    request = m.DescribeUserScramCredentialsRequest(users=None if users is None else [(u,) for u in users])
    response = node.call(request, 0)
    assert response.error_code == ErrorCode.NONE
    return [(r.user, r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in response.results]


def test_alter_then_describe_every_user_and_named_ones(node):
    assert alter(node, upsertions=[upsert("bob", SHA512, 8192), upsert("bob"), upsert("alice")]) == {
        "bob": (ErrorCode.NONE, None), "alice": (ErrorCode.NONE, None)}
    assert describe(node) == [("alice", 0, None, [(SHA256, 4096)]),
                              ("bob", 0, None, [(SHA256, 4096), (SHA512, 8192)])]
    assert describe(node, ["bob", "", "nobody", "alice", "alice"]) == [
        ("bob", 0, None, [(SHA256, 4096), (SHA512, 8192)]),
        ("", ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty", []),
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody",
         []),
        ("alice", ErrorCode.DUPLICATE_RESOURCE,
         "Cannot describe SCRAM credentials for the same user twice in a single request: alice", []),
    ]


def test_a_user_with_one_bad_entry_is_not_altered_at_all_and_others_are(node):
    results = alter(node, deletions=[("carol", SHA512)],
                    upsertions=[upsert("carol"), upsert("dave", 7), upsert("erin", iterations=100),
                                upsert("frank"), upsert("frank"), upsert("grace")])
    assert results == {
        "carol": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "dave": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "erin": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "frank": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "grace": (ErrorCode.NONE, None),
    }
    assert [user for user, *_ in describe(node)] == ["grace"]


def test_deleting_the_last_credential_removes_the_user(node):
    alter(node, upsertions=[upsert("hank")])
    assert alter(node, deletions=[("hank", SHA256)]) == {"hank": (ErrorCode.NONE, None)}
    assert describe(node) == []
    assert alter(node, upsertions=[upsert("", SHA256)]) == {"": (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                                                                 "Username must not be empty")}
