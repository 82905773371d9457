"""The client side of PLAIN and SCRAM, run against the broker's own server mechanisms in memory."""

from __future__ import annotations

import base64

import pytest

from twisted_kafka.sasl.client import PlainClient, SaslClientConfig, ScramClient, saslname
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.errors import AuthenticationFailed
from twisted_kafka.sasl.plain import PlainServer
from twisted_kafka.sasl.scram import ScramServer
from twisted_kafka.sasl.scram_credentials import MECHANISMS, SCRAM_SHA_256, credential_from_password


def store(user: str, password: str, iterations: int = 4096) -> InMemoryScramCredentialStore:
    return InMemoryScramCredentialStore({user: {name: credential_from_password(mechanism, password, iterations)
                                                for name, mechanism in MECHANISMS.items()}})


def run(client, server) -> None:
    """Carry the tokens between ``client`` and ``server`` until the client has completed."""
    token = client.initial_response()
    while not client.complete:
        assert token is not None
        token = client.evaluate(server.evaluate(token))
    assert server.complete


def test_plain_authenticates_with_an_empty_authorization_id():
    client, server = PlainClient("admin", "admin-secret"), PlainServer({"admin": "admin-secret"})
    assert client.initial_response() == b"\0admin\0admin-secret"
    assert client.evaluate(server.evaluate(b"\0admin\0admin-secret")) is None
    assert client.complete and server.user == "admin"


def test_plain_with_a_wrong_password_is_refused_by_the_server():
    with pytest.raises(AuthenticationFailed):
        run(PlainClient("admin", "guess"), PlainServer({"admin": "admin-secret"}))


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_scram_authenticates_against_the_server_and_verifies_its_signature(mechanism):
    server = ScramServer(MECHANISMS[mechanism], store("broker,1=x", "s3cret"))
    run(ScramClient(MECHANISMS[mechanism], "broker,1=x", "s3cret"), server)
    assert server.user == "broker,1=x", "the user name is escaped as a saslname and decoded back"


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_scram_with_a_wrong_password_is_refused_by_the_server(mechanism):
    with pytest.raises(AuthenticationFailed, match="wrong password"):
        run(ScramClient(MECHANISMS[mechanism], "broker", "guess"),
            ScramServer(MECHANISMS[mechanism], store("broker", "s3cret")))


def test_scram_refuses_a_server_that_does_not_hold_the_users_key():
    """A server that knows StoredKey but not ServerKey (or fakes the answer) cannot sign server-final."""
    client = ScramClient(SCRAM_SHA_256, "broker", "s3cret")
    server = ScramServer(SCRAM_SHA_256, store("broker", "s3cret"))
    final = client.evaluate(server.evaluate(client.initial_response()))
    assert final is not None
    server.evaluate(final)
    with pytest.raises(AuthenticationFailed, match="server signature is wrong"):
        client.evaluate(b"v=" + base64.b64encode(b"\0" * 32))
    assert not client.complete


def test_scram_matches_the_rfc_7677_example():
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                            b"i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert client.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete


@pytest.mark.parametrize("server_first, reason", [
    (b"r=other-nonce,s=QUJD,i=4096", "nonce"),
    (b"r=abc,s=QUJD,i=4096", "nonce"),                      # not extended at all
    (b"r=abcdef,s=QUJD,i=1000", "iterations"),
    (b"garbage", "invalid server-first"),
])
def test_scram_refuses_a_bad_server_first_message(server_first, reason):
    client = ScramClient(SCRAM_SHA_256, "u", "p", nonce="abc")
    client.initial_response()
    with pytest.raises(AuthenticationFailed, match=reason):
        client.evaluate(server_first)


def test_scram_reports_the_servers_error_attribute():
    client = ScramClient(SCRAM_SHA_256, "u", "p", nonce="abc")
    client.initial_response()
    client.evaluate(b"r=abcdef,s=QUJD,i=4096")
    with pytest.raises(AuthenticationFailed, match="invalid-proof"):
        client.evaluate(b"e=invalid-proof")


def test_saslname_escapes_comma_and_equals():
    assert saslname("a,b=c") == "a=2Cb=3Dc"


def test_the_configs_repr_never_shows_the_password():
    config = SaslClientConfig("CONTROL", "PLAIN", "admin", "admin-secret")
    assert "admin-secret" not in repr(config) and "admin-secret" not in str(config)
    assert isinstance(config.new_mechanism(), PlainClient)
    assert isinstance(SaslClientConfig("CONTROL", "SCRAM-SHA-512", "a", "b").new_mechanism(), ScramClient)
