"""How this broker's own connections present themselves on one of its inter-broker listeners.

The controller's channels (``control.plane.listener.name``, else the
inter-broker listener), the replica fetchers and the inter-broker sender
(``inter.broker.listener.name``, else the one named by
``security.inter.broker.protocol``) all connect as this broker: over TLS
with that listener's ``ssl.*`` keys (trust store, the key store as client
certificate, host name check) when it is SSL or SASL_SSL, and with
``sasl.mechanism.inter.broker.protocol`` and the listener's JAAS credentials
when it is SASL_PLAINTEXT or SASL_SSL -- Kafka's ``ChannelBuilders`` for the
inter-broker client.  Both are built at each connection attempt, so a key
store reloaded in place is used by the next connection.
"""

from __future__ import annotations

from twisted_kafka.network.tls import ClientTls
from twisted_kafka.sasl.client import SaslClientConfig
from twisted_kafka.sasl.listener_config import sasl_client_config

from .connector import SASL_PROTOCOLS, TLS_PROTOCOLS


class ListenerCredentials:
    """The TLS settings and SASL credentials of this broker's connections to ``listener_name``."""

    def __init__(self, config, listener_name: str):
        self.config = config
        self.listener_name = listener_name

    def tls(self, security_protocol: str) -> ClientTls | None:
        """The ``ClientTls`` of an SSL / SASL_SSL listener, else None; ``ConfigError`` if its keys are unusable."""
        if security_protocol not in TLS_PROTOCOLS:
            return None
        return ClientTls.from_config(self.config, self.listener_name)

    def sasl(self, security_protocol: str) -> SaslClientConfig | None:
        """How a connection to a SASL listener authenticates, else None; ``ConfigError`` naming the key at
        fault if it cannot."""
        if security_protocol not in SASL_PROTOCOLS:
            return None
        return sasl_client_config(self.config, self.listener_name)


__all__ = ["ListenerCredentials"]
