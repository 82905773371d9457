"""Each SASL listener's ``SaslServerConfig``, from the broker configuration, checked at startup.

Kafka's keys, resolved per listener as Kafka resolves them:

* ``sasl.enabled.mechanisms`` (``listener.name.<l>.sasl.enabled.mechanisms``
  first): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are implemented; any other
  (Kafka's default GSSAPI, OAUTHBEARER) is refused at startup, naming the
  listener, rather than failing every client later;
* ``listener.name.<l>.plain.sasl.jaas.config``: the PlainLoginModule whose
  ``user_<name>="<password>"`` options are PLAIN's users -- required when
  PLAIN is enabled, as Kafka requires a JAAS section for it;
* SCRAM's credentials are the broker's ``ScramCredentialStore``; the
  ``scram-sha-*.sasl.jaas.config`` (ScramLoginModule) is accepted but not
  needed, since no option of it is read by a broker.

The listener the controller connects to (``control.plane.listener.name``, or
``inter.broker.listener.name``) cannot be a SASL listener yet: the broker's
own client does not authenticate yet (Kafka's ``sasl.mechanism.inter.broker.protocol``).
"""

from __future__ import annotations

from twisted_kafka.config import ConfigError

from .authenticator import SUPPORTED_MECHANISMS, SaslServerConfig
from .credential_store import ScramCredentialStore
from .plain import PLAIN, plain_users

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def sasl_server_configs(config, listeners, scram_store: ScramCredentialStore | None) -> dict[str, SaslServerConfig]:
    """``{listener name: SaslServerConfig}`` for every SASL listener; ``ConfigError`` for what Kafka (or this
    broker) would refuse."""
    configs: dict[str, SaslServerConfig] = {}
    controller_listener = listeners.control_plane_listener_name or listeners.inter_broker_listener_name
    for endpoint in listeners.listeners:
        if endpoint.security_protocol not in SASL_PROTOCOLS:
            continue
        name = endpoint.listener_name
        if name in (controller_listener, listeners.inter_broker_listener_name):
            raise ConfigError("inter.broker.listener.name",
                              f"listener {name} carries the controller's or inter-broker connections, which "
                              f"cannot authenticate with SASL yet: use a PLAINTEXT (or SSL) listener for them")
        mechanisms = tuple(config.listener_effective(name, "sasl.enabled.mechanisms"))
        key = f"listener.name.{name.lower()}.sasl.enabled.mechanisms"
        if not mechanisms:
            raise ConfigError(key, f"SASL listener {name} enables no SASL mechanism")
        unsupported = [mechanism for mechanism in mechanisms if mechanism not in SUPPORTED_MECHANISMS]
        if unsupported:
            raise ConfigError(key, f"SASL listener {name} enables {', '.join(unsupported)}, which this broker "
                                   f"does not implement (supported: {', '.join(SUPPORTED_MECHANISMS)})",
                              ",".join(mechanisms))
        users: dict[str, str] = {}
        if PLAIN in mechanisms:
            jaas_key = f"listener.name.{name.lower()}.plain.sasl.jaas.config"
            jaas = config.listener_value(name, "sasl.jaas.config", "plain")
            if jaas is None:
                raise ConfigError(jaas_key, f"PLAIN is enabled on listener {name}, but no PlainLoginModule "
                                            "configuration with user_<name>=\"<password>\" options is given")
            try:
                users = plain_users(jaas.value)
            except ValueError as exc:
                raise ConfigError(jaas_key, str(exc)) from None
        configs[name] = SaslServerConfig(listener_name=name, enabled_mechanisms=mechanisms, plain_users=users,
                                         scram_store=scram_store)
    return configs


__all__ = ["sasl_server_configs", "SASL_PROTOCOLS"]
