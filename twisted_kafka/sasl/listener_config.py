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
  ``scram-sha-*.sasl.jaas.config`` (ScramLoginModule) holds only the broker's
  own client credentials (below).

The broker's own connections (the controller's channels to the control-plane
listener -- ``control.plane.listener.name``, else the inter-broker one -- and
the replica fetchers to ``inter.broker.listener.name``) authenticate as Kafka's
do when that listener is SASL: with ``sasl.mechanism.inter.broker.protocol``,
which must be implemented here and enabled on the listener, and the
``username``/``password`` options of the listener's JAAS configuration for that
mechanism, ``listener.name.<l>.<mechanism lower case>.sasl.jaas.config``
(PlainLoginModule or ScramLoginModule).  ``sasl_client_config`` builds those
settings; ``sasl_server_configs`` checks them at startup.
"""

from __future__ import annotations

from twisted_kafka.config import ConfigError

from .authenticator import SUPPORTED_MECHANISMS, SaslServerConfig
from .client import SaslClientConfig
from .credential_store import ScramCredentialStore
from .plain import PLAIN, PLAIN_LOGIN_MODULE, parse_jaas_options, plain_users

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
INTER_BROKER_MECHANISM = "sasl.mechanism.inter.broker.protocol"

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
        if name in (controller_listener, listeners.inter_broker_listener_name):
            sasl_client_config(config, name)      # the broker's own connections to it can authenticate
        configs[name] = SaslServerConfig(listener_name=name, enabled_mechanisms=mechanisms, plain_users=users,
                                         scram_store=scram_store)
    return configs


def sasl_client_config(config, listener_name: str) -> SaslClientConfig:
    """How the broker's own connections authenticate to SASL listener ``listener_name``; ``ConfigError``
    naming the key at fault if they cannot."""
    mechanism = config[INTER_BROKER_MECHANISM]
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(INTER_BROKER_MECHANISM,
                          f"listener {listener_name} carries the broker's own (controller or inter-broker) "
                          f"connections and is a SASL listener, so they authenticate with this mechanism; "
                          f"this broker implements {', '.join(SUPPORTED_MECHANISMS)}", mechanism)
    enabled = tuple(config.listener_effective(listener_name, "sasl.enabled.mechanisms"))
    if mechanism not in enabled:
        raise ConfigError(INTER_BROKER_MECHANISM,
                          f"{mechanism} is not enabled on listener {listener_name} (sasl.enabled.mechanisms: "
                          f"{', '.join(enabled) or 'none'}), which carries the broker's own connections", mechanism)
    jaas_key = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = config.listener_value(listener_name, "sasl.jaas.config", mechanism.lower())
    if jaas is None:
        raise ConfigError(jaas_key, f"the broker's own connections to listener {listener_name} authenticate "
                                    f"with {mechanism}, but no login module configuration gives their "
                                    'username="..." password="..."')
    expected_module = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    try:
        module, options = parse_jaas_options(jaas.value)
    except ValueError as exc:
        raise ConfigError(jaas_key, str(exc)) from None
    if module != expected_module:
        raise ConfigError(jaas_key, f"{mechanism} needs {expected_module}, not {module}")
    missing = [option for option in ("username", "password") if not options.get(option)]
    if missing:
        raise ConfigError(jaas_key, f"the {' and '.join(missing)} option(s) of the broker's own connections "
                                    f"to listener {listener_name} are missing")
    return SaslClientConfig(listener_name=listener_name, mechanism=mechanism, username=options["username"],
                            password=options["password"])


__all__ = ["sasl_server_configs", "sasl_client_config", "SASL_PROTOCOLS", "SCRAM_LOGIN_MODULE"]
