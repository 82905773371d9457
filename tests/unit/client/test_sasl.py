"""connect() on a SASL listener: SaslHandshake v1 and SaslAuthenticate v2 against the broker's own
server authenticator, in memory; a refusal fails the attempt, names the listener and closes the connection."""

from __future__ import annotations

import pytest

from twisted_kafka.client import ConnectFailed, KafkaClientProtocol, connect
from twisted_kafka.client.sasl import SaslAuthenticationFailed
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.sasl.authenticator import SaslServerConfig
from twisted_kafka.sasl.client import SaslClientConfig
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.scram_credentials import MECHANISMS, credential_from_password

from .helpers import Brokers
from .test_protocol import failure_of, result_of

STORE = InMemoryScramCredentialStore({"broker": {name: credential_from_password(mechanism, "b-secret")
                                                 for name, mechanism in MECHANISMS.items()}})
SERVER = SaslServerConfig(listener_name="CONTROL", enabled_mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                          plain_users={"broker": "b-secret"}, scram_store=STORE)


def sasl_brokers(server: SaslServerConfig = SERVER) -> tuple[Brokers, list]:
    """Brokers whose connections run ``server``'s authenticator; the list collects principals and failures."""
    outcomes: list = []
    authenticators: dict[int, object] = {}

    def respond(event):
        authenticator = authenticators.setdefault(0, server.new_authenticator())
        header, body = event.header, event.body
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            step = authenticator.handshake(header.api_version, body.mechanism)
        elif header.api_key == ApiKey.SASL_AUTHENTICATE:
            step = authenticator.authenticate(header.api_version, body.auth_bytes)
        else:
            raise AssertionError(f"unexpected request {header.api_key}")
        if step.principal or step.failure:
            outcomes.append(step.principal or step.failure)
        return step.response

    brokers = Brokers(respond)
    brokers.listen(9093)
    return brokers, outcomes


def attempt(brokers: Brokers, sasl: SaslClientConfig | None):
    d = connect(brokers.reactor, "127.0.0.1", 9093, client_id="controller-1", timeout=5, name="broker 1",
                security_protocol="SASL_PLAINTEXT", sasl=sasl)
    broker = brokers.accept()
    brokers.flush()
    return d, broker


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_connection_is_handed_over_once_authenticated(mechanism):
    brokers, outcomes = sasl_brokers()
    d, _ = attempt(brokers, SaslClientConfig("CONTROL", mechanism, "broker", "b-secret"))
    client = result_of(d)
    assert isinstance(client, KafkaClientProtocol) and client.is_open
    assert outcomes == ["User:broker"]
    kinds = [(e.header.api_key, e.header.api_version) for e in brokers.received]
    expected_rounds = 1 if mechanism == "PLAIN" else 2
    assert kinds == [(ApiKey.SASL_HANDSHAKE, 1)] + [(ApiKey.SASL_AUTHENTICATE, 2)] * expected_rounds


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_credentials_fail_the_attempt_naming_the_listener_and_close_the_connection(mechanism):
    brokers, outcomes = sasl_brokers()
    d, broker = attempt(brokers, SaslClientConfig("CONTROL", mechanism, "broker", "guess"))
    error = failure_of(d).value
    assert isinstance(error, SaslAuthenticationFailed) and isinstance(error, ConnectFailed)
    assert "listener CONTROL" in str(error) and mechanism in str(error) and "broker 1" in str(error)
    assert "SASL_AUTHENTICATION_FAILED" in str(error)
    assert "guess" not in str(error)
    brokers.flush()
    assert broker.lost, "the connection is closed"


def test_a_mechanism_the_listener_does_not_enable_fails_with_the_enabled_list():
    brokers, _ = sasl_brokers(SaslServerConfig(listener_name="CONTROL", enabled_mechanisms=("SCRAM-SHA-512",),
                                               scram_store=STORE))
    d, _ = attempt(brokers, SaslClientConfig("CONTROL", "PLAIN", "broker", "b-secret"))
    error = str(failure_of(d).value)
    assert "UNSUPPORTED_SASL_MECHANISM" in error and "SCRAM-SHA-512" in error


def test_a_sasl_listener_without_sasl_settings_is_a_programming_error():
    with pytest.raises(ValueError, match="SASL settings"):
        connect(Brokers().reactor, "127.0.0.1", 9093, client_id=None, timeout=1, security_protocol="SASL_PLAINTEXT")


def test_the_connect_timeout_covers_the_sasl_exchange():
    brokers = Brokers(auto=False)
    brokers.listen(9093)
    d = connect(brokers.reactor, "127.0.0.1", 9093, client_id=None, timeout=2, name="broker 1",
                security_protocol="SASL_PLAINTEXT", sasl=SaslClientConfig("CONTROL", "PLAIN", "broker", "x"))
    broker = brokers.accept()
    assert result_of(d) is None, "the handshake is not answered"
    brokers.reactor.advance(2)
    error = failure_of(d).value
    assert isinstance(error, ConnectFailed) and "within 2 s" in str(error)
    brokers.flush()
    assert broker.lost
