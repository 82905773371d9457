"""SASL/PLAIN on bytes and Kafka's PlainLoginModule syntax."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twisted_kafka.sasl.errors import AuthenticationFailed
from twisted_kafka.sasl.plain import PlainServer, parse_jaas_options, plain_users

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '    username="admin" password="admin-secret"\n'
        '    user_admin="admin-secret" user_alice="alice secret with \\"quotes\\""  user_bob=bare;')


def test_users_from_the_login_module_options():
    assert plain_users(JAAS) == {"admin": "admin-secret", "alice": 'alice secret with "quotes"', "bob": "bare"}


def test_other_login_modules_and_garbage_are_refused():
    with pytest.raises(ValueError, match="PlainLoginModule"):
        plain_users('org.apache.kafka.common.security.scram.ScramLoginModule required;')
    with pytest.raises(ValueError):
        parse_jaas_options("user_alice=secret")
    with pytest.raises(ValueError):
        parse_jaas_options('x.Y required user_alice="unterminated;')


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an authorization id that is different "
                                  "from username"),
])
def test_failures_say_what_kafka_says(token, message):
    with pytest.raises(AuthenticationFailed) as failed:
        PlainServer({"alice": "alice-secret"}).evaluate(token)
    assert failed.value.client_message == message


def test_success_with_and_without_an_authorization_id():
    for token in (b"\0alice\0alice-secret", b"alice\0alice\0alice-secret"):
        server = PlainServer({"alice": "alice-secret"})
        assert server.evaluate(token) == b""
        assert server.complete and server.user == "alice"


@settings(max_examples=300, deadline=None)
@given(token=st.binary(max_size=80))
def test_arbitrary_tokens_fail_cleanly(token):
    with contextlib.suppress(AuthenticationFailed):
        PlainServer({"alice": "alice-secret"}).evaluate(token)
