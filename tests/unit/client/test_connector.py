"""connect(): the endpoint by security protocol, the connect timeout on the clock, errors naming the peer."""

from __future__ import annotations

import pytest
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.error import ConnectingCancelledError
from twisted.internet.testing import MemoryReactorClock

from twisted_kafka.client import ConnectFailed, KafkaClientProtocol, client_endpoint, connect, endpoint_description

from .helpers import Brokers
from .test_protocol import failure_of, result_of


def test_descriptions_are_plain_tcp_with_ipv6_literals_quoted_and_the_timeout_in_whole_seconds():
    assert endpoint_description("localhost", 9093) == "tcp:host=localhost:port=9093"
    assert endpoint_description("::1", 9093, timeout=30) == r"tcp:host=\:\:1:port=9093:timeout=30"
    assert endpoint_description("h", 1, timeout=1.5) == "tcp:host=h:port=1:timeout=2", "never shorter"
    assert endpoint_description("h", 1, timeout=0.01) == "tcp:host=h:port=1:timeout=1"


@pytest.mark.parametrize("security_protocol", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_plain_security_protocols_connect_over_tcp(security_protocol):
    endpoint = client_endpoint(MemoryReactorClock(), "::1", 9093, security_protocol=security_protocol, timeout=3)
    assert isinstance(endpoint, TCP4ClientEndpoint)   # Twisted's TCP client takes IPv6 literals too
    assert (endpoint._host, endpoint._port, endpoint._timeout) == ("::1", 9093, 3)


@pytest.mark.parametrize("security_protocol", ["SSL", "SASL_SSL", "BOGUS"])
def test_tls_and_unknown_security_protocols_are_refused_with_a_reason(security_protocol):
    with pytest.raises(ValueError, match=security_protocol):
        client_endpoint(MemoryReactorClock(), "h", 9093, security_protocol=security_protocol)


def test_connect_fires_with_a_protocol_that_names_its_peer():
    brokers = Brokers()
    brokers.listen(9093)
    d = connect(brokers.reactor, "127.0.0.1", 9093, client_id="controller-1", timeout=1.5, name="broker 2")
    assert brokers.attempts() == [("127.0.0.1", 9093, 2)]
    assert result_of(d) is None
    brokers.accept()
    protocol = result_of(d)
    assert isinstance(protocol, KafkaClientProtocol) and protocol.is_open
    assert protocol.peer == "broker 2 at 127.0.0.1:9093"
    brokers.reactor.advance(10)
    assert protocol.is_open, "the connect timeout no longer applies once connected"


def test_a_refused_connection_fails_with_connect_failed_naming_the_peer():
    brokers = Brokers()
    d = connect(brokers.reactor, "::1", 9093, client_id=None, timeout=1.5, name="broker 2")
    brokers.refuse()
    error = failure_of(d).value
    assert isinstance(error, ConnectFailed) and isinstance(error, ConnectionError)
    assert "broker 2 at [::1]:9093" in str(error) and "refused" in str(error)


def test_an_attempt_that_takes_longer_than_the_timeout_is_abandoned_at_the_timeout():
    brokers = Brokers()
    d = connect(brokers.reactor, "127.0.0.1", 9093, client_id=None, timeout=1.5, name="broker 2")
    brokers.reactor.advance(1.499)
    assert result_of(d) is None
    brokers.reactor.advance(0.001)
    error = failure_of(d).value
    assert isinstance(error, ConnectFailed) and "no connection within 1.5 s" in str(error)
    assert brokers.attempts() == [], "the attempt itself was stopped"


def test_cancelling_abandons_the_attempt():
    brokers = Brokers()
    d = connect(brokers.reactor, "127.0.0.1", 9093, client_id=None, timeout=1.5)
    d.cancel()
    assert failure_of(d).check(ConnectingCancelledError)
    assert brokers.attempts() == []
    assert not brokers.reactor.getDelayedCalls(), "no timeout left behind"


def test_tls_security_protocols_wrap_tcp_in_tls(tmp_path):
    import trustme

    from twisted_kafka.config import KafkaConfig
    from twisted_kafka.network.tls import ClientTls

    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    config = KafkaConfig.from_props({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file)})
    tls = ClientTls.from_config(config, "CONTROLLER")
    endpoint = client_endpoint(MemoryReactorClock(), "h", 9093, security_protocol="SSL", tls=tls)
    assert type(endpoint).__name__ == "_WrapperEndpoint"
    assert tls.settings.endpoint_identification == "https" and tls.settings.key is None
