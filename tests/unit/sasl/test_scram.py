"""SCRAM on bytes: RFC 7677's test vector, Kafka's failure messages, and the credentials' forms."""

from __future__ import annotations

import base64
import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.errors import AuthenticationFailed
from twisted_kafka.sasl.scram import ScramServer
from twisted_kafka.sasl.scram_credentials import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)

# RFC 7677 section 3: user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_store():
    return InMemoryScramCredentialStore(
        {"user": {"SCRAM-SHA-256": credential_from_password(SCRAM_SHA_256, "pencil", 4096, salt=SALT)}})


def test_rfc_7677_exchange():
    server = ScramServer(SCRAM_SHA_256, rfc_store(), server_nonce=SERVER_NONCE)
    assert server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert not server.complete
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.user == "user"


def test_a_wrong_proof_fails_with_kafkas_generic_message():
    server = ScramServer(SCRAM_SHA_256, rfc_store(), server_nonce=SERVER_NONCE)
    server.evaluate(CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed) as failed:
        server.evaluate(CLIENT_FINAL.replace(b"p=dHzb", b"p=AAAA"))
    assert failed.value.client_message == ("Authentication failed during authentication due to invalid credentials "
                                           "with SASL mechanism SCRAM-SHA-256")
    assert "invalid proof for user 'user' (wrong password)" in failed.value.reason


def test_an_unknown_user_fails_alike_for_the_client_and_is_named_in_the_log():
    server = ScramServer(SCRAM_SHA_256, rfc_store())
    with pytest.raises(AuthenticationFailed) as failed:
        server.evaluate(b"n,,n=mallory,r=abcdef")
    assert failed.value.client_message.startswith("Authentication failed during authentication due to invalid")
    assert "unknown user 'mallory'" in failed.value.reason


def test_a_credential_for_another_mechanism_does_not_authenticate():
    server = ScramServer(SCRAM_SHA_512, rfc_store())
    with pytest.raises(AuthenticationFailed):
        server.evaluate(b"n,,n=user,r=abcdef")


def test_delegation_tokens_are_refused():
    server = ScramServer(SCRAM_SHA_256, rfc_store())
    with pytest.raises(AuthenticationFailed, match="delegation tokens"):
        server.evaluate(b"n,,n=user,r=abcdef,tokenauth=true")


def test_an_authorization_id_other_than_the_user_is_refused_as_kafka_does():
    server = ScramServer(SCRAM_SHA_256, rfc_store())
    with pytest.raises(AuthenticationFailed) as failed:
        server.evaluate(b"n,a=admin,n=user,r=abcdef")
    assert failed.value.client_message == ("Authentication failed: Client requested an authorization id that is "
                                           "different from username")
    assert ScramServer(SCRAM_SHA_256, rfc_store()).evaluate(b"n,a=user,n=user,r=abcdef").startswith(b"r=abcdef")


def test_channel_binding_flags_and_malformed_messages_are_refused():
    for message in (b"y,,n=user,r=abc", b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=user,r=a,b", b"\xff"):
        with pytest.raises(AuthenticationFailed):
            ScramServer(SCRAM_SHA_256, rfc_store()).evaluate(message)


def test_a_client_final_nonce_need_only_end_with_the_servers_as_kafka_checks():
    """librdkafka 2.0 (kcat 1.7) sends its own nonce again in front of the combined one; Kafka accepts it."""
    import hashlib
    import hmac

    server = ScramServer(SCRAM_SHA_256, rfc_store(), server_nonce=SERVER_NONCE)
    server.evaluate(CLIENT_FIRST)
    combined = "rOprNGfwEbeRWgbNEkqO" + SERVER_NONCE
    without_proof = f"c=biws,r=rOprNGfwEbeRWgbNEkqO{combined}"
    auth_message = f"n=user,r=rOprNGfwEbeRWgbNEkqO,{SERVER_FIRST.decode()},{without_proof}".encode()
    salted = salted_password(SCRAM_SHA_256, "pencil", SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    assert server.evaluate(without_proof.encode() + b",p=" + proof).startswith(b"v=")
    assert server.complete


def test_a_client_final_with_another_nonce_is_refused():
    server = ScramServer(SCRAM_SHA_256, rfc_store(), server_nonce=SERVER_NONCE)
    server.evaluate(CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.evaluate(CLIENT_FINAL.replace(b"k0,p=", b"k1,p="))


def test_credential_from_the_salted_password_equals_the_one_from_the_password():
    salted = salted_password(SCRAM_SHA_512, "secret", b"salt" * 8, 4096)
    assert credential_from_salted_password(SCRAM_SHA_512, b"salt" * 8, salted, 4096) == \
        credential_from_password(SCRAM_SHA_512, "secret", 4096, salt=b"salt" * 8)


def test_the_text_form_is_kafkas():
    credential = credential_from_password(SCRAM_SHA_256, "pencil", 4096, salt=SALT)
    text = credential.to_text()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == credential
    with pytest.raises(ValueError):
        ScramCredential.from_text("salt=###,iterations=1")


@settings(max_examples=300, deadline=None)
@given(first=st.binary(max_size=120), final=st.binary(max_size=200))
def test_arbitrary_client_messages_fail_cleanly(first, final):
    """Whatever a client sends, the exchange answers or raises AuthenticationFailed, nothing else."""
    server = ScramServer(SCRAM_SHA_256, rfc_store(), server_nonce=SERVER_NONCE)
    for message in (first, final):
        try:
            server.evaluate(message)
        except AuthenticationFailed:
            return


@settings(max_examples=300, deadline=None)
@given(final=st.from_regex(rb"c=[a-zA-Z0-9+/]{0,8}={0,2},r=rOprNGfwEbeRWgbNEkqO[!-~]{0,40},p=[a-zA-Z0-9+/=]{0,60}",
                           fullmatch=True))
def test_near_valid_client_finals_fail_cleanly(final):
    server = ScramServer(SCRAM_SHA_256, rfc_store(), server_nonce=SERVER_NONCE)
    server.evaluate(CLIENT_FIRST)
    with contextlib.suppress(AuthenticationFailed):
        server.evaluate(final)
