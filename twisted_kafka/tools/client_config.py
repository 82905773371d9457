"""``--bootstrap-server`` and ``--command-config`` into the settings of the clients the tools use.

A ``--command-config`` file is a Java client's properties (``Utils.loadProps``):
the same file an operator hands Kafka's tools.  librdkafka takes most of its
keys under the same names; the Java-only ones are translated here:

* ``sasl.jaas.config`` (``PlainLoginModule`` / ``ScramLoginModule`` with
  ``username`` and ``password``) becomes ``sasl.username`` / ``sasl.password``;
* a PEM trust store (``ssl.truststore.type=PEM``) becomes ``ssl.ca.location``
  (``ssl.truststore.certificates`` becomes ``ssl.ca.pem``); a PEM key store
  becomes ``ssl.certificate.location`` + ``ssl.key.location`` and a PKCS12
  one stays ``ssl.keystore.location``; JKS stores cannot be read outside a
  JVM and are refused, naming the key;
* ``ssl.endpoint.identification.algorithm=`` (empty: no host name check)
  becomes ``none``;
* ``receive.buffer.bytes`` / ``send.buffer.bytes`` become librdkafka's
  ``socket.*`` names; ``default.api.timeout.ms`` is the tools' own wait for
  an answer;
* Java class settings (serializers, interceptors, callback handlers) and
  keys that only tune a JVM client are dropped with a warning on standard
  error.

kafka-python, which serves the admin APIs librdkafka lacks, gets the same
settings in its own names (``kafka_python_settings``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from twisted_kafka.config.errors import ConfigError
from twisted_kafka.config.properties import load_properties
from twisted_kafka.sasl.plain import parse_jaas_options

from .command import ToolError

__all__ = ["ClientSettings", "client_settings", "load_client_properties"]

#: How long a tool waits for an answer unless ``default.api.timeout.ms`` says otherwise (Kafka's admin: 60 s).
DEFAULT_TIMEOUT_MS = 60_000

#: Java client keys with no librdkafka meaning: dropped, with a warning.
_JAVA_ONLY = (
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer", "interceptor.classes",
    "sasl.client.callback.handler.class", "sasl.login.callback.handler.class", "sasl.login.class",
    "ssl.protocol", "ssl.provider", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation", "ssl.engine.factory.class", "security.providers",
    "metric.reporters", "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
    "auto.include.jmx.reporter", "enable.metrics.push", "client.dns.lookup", "reconnect.backoff.max.ms",
    "retry.backoff.max.ms", "socket.connection.setup.timeout.max.ms", "partitioner.class",
    "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
)
_RENAMED = {"receive.buffer.bytes": "socket.receive.buffer.bytes", "send.buffer.bytes": "socket.send.buffer.bytes"}
_LOGIN_MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule",
                  "org.apache.kafka.common.security.scram.ScramLoginModule")


@dataclass
class ClientSettings:
    """librdkafka settings (``bootstrap.servers`` included) and the tools' wait for an answer."""

    librdkafka: dict[str, str] = field(default_factory=dict)
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    source: str = "--command-config"

    @property
    def timeout(self) -> float:
        return self.timeout_ms / 1000

    def kafka_python_settings(self) -> dict:
        """The same connection in kafka-python's ``KafkaAdminClient`` names."""
        conf = self.librdkafka
        unsupported = [key for key in ("ssl.keystore.location", "ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem")
                       if key in conf]
        if unsupported:
            raise ToolError(f"{self.source}: {unsupported[0]} cannot be used for this command (kafka-python reads "
                            "PEM files only: give ssl.keystore.type=PEM or ssl.certificate.location/ssl.key.location)")
        settings: dict = {"bootstrap_servers": conf["bootstrap.servers"].split(","),
                          "client_id": conf.get("client.id", "twisted-kafka-tools"),
                          "request_timeout_ms": self.timeout_ms}
        names = {"security.protocol": "security_protocol", "ssl.ca.location": "ssl_cafile",
                 "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile",
                 "ssl.key.password": "ssl_password", "sasl.username": "sasl_plain_username",
                 "sasl.password": "sasl_plain_password"}
        for key, name in names.items():
            if key in conf:
                settings[name] = conf[key]
        if "security_protocol" in settings:
            settings["security_protocol"] = settings["security_protocol"].upper()
        mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms"))
        if mechanism:
            settings["sasl_mechanism"] = mechanism
        if conf.get("ssl.endpoint.identification.algorithm") == "none":
            settings["ssl_check_hostname"] = False
        return settings


def load_client_properties(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return load_properties(path)
    except ConfigError as exc:
        raise ToolError(str(exc)) from exc


def client_settings(bootstrap_server: str, command_config: str | None, *,
                    overrides: dict[str, str] | None = None, client_id: str | None = None,
                    source: str = "--command-config") -> ClientSettings:
    """Settings for a client of ``bootstrap_server`` from the properties file ``command_config``.

    ``overrides`` (a console tool's ``--producer-property`` pairs) take precedence over the file;
    ``client_id`` is the default ``client.id`` when neither sets one (Kafka's tools name themselves).
    """
    props = load_client_properties(command_config)
    props.update(overrides or {})
    settings = ClientSettings(source=command_config or source)
    conf = settings.librdkafka
    store = {key: props.pop(key) for key in list(props) if key.startswith(("ssl.truststore.", "ssl.keystore."))}
    for key, value in props.items():
        if key == "default.api.timeout.ms":
            settings.timeout_ms = _int(key, value, settings.source)
        elif key == "sasl.jaas.config":
            conf.update(_jaas(value, settings.source))
        elif key == "ssl.endpoint.identification.algorithm":
            conf[key] = value.strip() or "none"
        elif key in _RENAMED:
            conf[_RENAMED[key]] = value
        elif key in _JAVA_ONLY:
            print(f"WARN: {settings.source}: {key} has no meaning outside a JVM client and is ignored",
                  file=sys.stderr)
        elif key == "bootstrap.servers":
            continue   # --bootstrap-server decides, as in Kafka's tools
        else:
            conf[key] = value
    conf.update(_stores(store, settings.source))
    conf["bootstrap.servers"] = bootstrap_server
    if client_id is not None:
        conf.setdefault("client.id", client_id)
    return settings


def _int(key: str, value: str, source: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ToolError(f"{source}: {key} must be an integer, not {value!r}") from None


def _jaas(value: str, source: str) -> dict[str, str]:
    try:
        module, options = parse_jaas_options(value)
    except ValueError as exc:
        raise ToolError(f"{source}: sasl.jaas.config: {exc}") from None
    if module not in _LOGIN_MODULES:
        raise ToolError(f"{source}: sasl.jaas.config: {module} is not supported here "
                        "(PlainLoginModule and ScramLoginModule are)")
    if "username" not in options or "password" not in options:
        raise ToolError(f"{source}: sasl.jaas.config needs username=\"...\" and password=\"...\"")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _stores(store: dict[str, str], source: str) -> dict[str, str]:
    """Java's trust and key store settings as librdkafka's."""
    conf: dict[str, str] = {}
    if "ssl.truststore.certificates" in store:
        conf["ssl.ca.pem"] = store["ssl.truststore.certificates"]
    if "ssl.truststore.location" in store:
        kind = store.get("ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            raise ToolError(f"{source}: ssl.truststore.location: a {kind} trust store cannot be read here; "
                            "give a PEM file with ssl.truststore.type=PEM (or ssl.ca.location)")
        conf["ssl.ca.location"] = store["ssl.truststore.location"]
    if "ssl.keystore.certificate.chain" in store:
        conf["ssl.certificate.pem"] = store["ssl.keystore.certificate.chain"]
    if "ssl.keystore.key" in store:
        conf["ssl.key.pem"] = store["ssl.keystore.key"]
    if "ssl.keystore.location" in store:
        kind = store.get("ssl.keystore.type", "JKS").upper()
        location = store["ssl.keystore.location"]
        if kind == "PEM":
            conf["ssl.certificate.location"] = location
            conf["ssl.key.location"] = location
        elif kind == "PKCS12":
            conf["ssl.keystore.location"] = location
            if "ssl.keystore.password" in store:
                conf["ssl.keystore.password"] = store["ssl.keystore.password"]
        else:
            raise ToolError(f"{source}: ssl.keystore.location: a {kind} key store cannot be read here; "
                            "give ssl.keystore.type=PEM or PKCS12")
    return conf
