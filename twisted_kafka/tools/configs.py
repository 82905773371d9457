"""``twisted-kafka-configs``: Kafka's ``kafka-configs.sh`` (``ConfigCommand``) against a running cluster.

    twisted-kafka-configs --bootstrap-server HOST:PORT --describe --entity-type topics [--entity-name t] [--all]
    twisted-kafka-configs --bootstrap-server HOST:PORT --alter --entity-type topics --entity-name t \\
        --add-config 'retention.ms=1000,cleanup.policy=[compact,delete]' [--delete-config k1,k2]
    twisted-kafka-configs --bootstrap-server HOST:PORT --alter --entity-type brokers \
        (--entity-name 1 | --entity-default) --add-config log.cleaner.threads=2
    twisted-kafka-configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    twisted-kafka-configs --bootstrap-server HOST:PORT --alter --entity-type ips \\
        (--entity-name 10.0.0.1 | --entity-default) --add-config connection_creation_rate=10

The shorthand entity flags (``--topic``, ``--broker``, ``--broker-defaults``,
``--user``, ``--ip``, ``--ip-defaults``, ...) work as in Kafka.  Topic,
broker and broker-default configs travel as DescribeConfigs /
IncrementalAlterConfigs (44); users' SCRAM credentials as Describe/Alter-
UserScramCredentials (50/51, KIP-554: the password is salted and hashed by
the client, only the salted password travels); quotas of users, clients and
IPs as Describe/AlterClientQuotas (48/49).  ``--describe`` prints Kafka's
lines: ``Dynamic configs for topic t are:`` and ``  k=v sensitive=false
synonyms={DYNAMIC_TOPIC_CONFIG:k=v, ...}``, ``SCRAM credential configs for
user-principal 'alice' are SCRAM-SHA-256=iterations=8192``, ``Quota configs
for ip '10.0.0.1' are connection_creation_rate=10.0``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from twisted_kafka.sasl.scram_credentials import DEFAULT_ITERATIONS, MECHANISMS

from .admin import Admin
from .client_config import client_settings, load_client_properties
from .command import KafkaArgumentParser, ToolError, UsageError, run_tool

PROG = "twisted-kafka-configs"
TOPICS, CLIENTS, USERS, BROKERS, BROKER_LOGGERS, IPS, CLIENT_METRICS, GROUPS = (
    "topics", "clients", "users", "brokers", "broker-loggers", "ips", "client-metrics", "groups")
ENTITY_TYPES = (TOPICS, CLIENTS, USERS, BROKERS, BROKER_LOGGERS, IPS, CLIENT_METRICS, GROUPS)
#: Kafka's shorthand flags: (flag, entity type, takes a name).
ENTITY_FLAGS = (("topic", TOPICS), ("client", CLIENTS), ("user", USERS), ("broker", BROKERS),
                ("broker_logger", BROKER_LOGGERS), ("ip", IPS), ("client_metrics", CLIENT_METRICS), ("group", GROUPS))
DEFAULT_FLAGS = (("client_defaults", CLIENTS), ("user_defaults", USERS), ("broker_defaults", BROKERS),
                 ("ip_defaults", IPS))
#: The entity types whose configs are a DescribeConfigs resource.  broker-loggers (BROKER_LOGGER, 8) and
#: client-metrics (16) have no ResourceType in confluent-kafka, and are refused.
RESOURCE_TYPES = {TOPICS: ResourceType.TOPIC, BROKERS: ResourceType.BROKER, GROUPS: ResourceType.GROUP}
#: Kafka's quota entity names (ClientQuotaEntity) and how ConfigCommand prints them.
QUOTA_ENTITIES = {USERS: ("user", "user-principal"), CLIENTS: ("client-id", "client-id"), IPS: ("ip", "ip")}
#: Kafka's DynamicConfig.Ip / ClientQuota key names.
IP_QUOTA_KEYS = ("connection_creation_rate",)
CLIENT_QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
#: Kafka's ScramCredentialUtils regex for one credential, and the order twisted-kafka-scram has always accepted too.
_SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
_SCRAM_VALUE_REVERSED = re.compile(r"password=(.*),iterations=(-?[0-9]+)", re.DOTALL)


class _EntityName(argparse.Action):
    """``--entity-name`` and ``--entity-default`` into one ordered list ("" for a default), as Kafka pairs
    them with the ``--entity-type`` flags in order."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = list(getattr(namespace, "entity_names", None) or [])
        names.append("" if option_string == "--entity-default" else values)
        namespace.entity_names = names


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to manipulate and describe entity config for a topic, client, "
                                  "user, broker, ip, client-metrics or group")
    p.add_argument("--bootstrap-server", help="The Kafka servers to connect to.")
    p.add_argument("--bootstrap-controller", help="Not supported here: name a broker with --bootstrap-server.")
    p.add_argument("--zookeeper", help="Removed in Kafka 4.0; for SCRAM credentials in ZooKeeper use "
                                       "twisted-kafka-scram --zookeeper.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--all", action="store_true", help="List all configs for the given entity, including static "
                                                      "configs if available.")
    p.add_argument("--entity-type", action="append", default=[],
                   help="Type of entity (topics/clients/users/brokers/broker-loggers/ips/client-metrics/groups)")
    p.add_argument("--entity-name", action=_EntityName, dest="entity_names", default=[],
                   help="Name of entity (topic name/client id/user principal name/broker id/ip/...)")
    p.add_argument("--entity-default", action=_EntityName, dest="entity_names", nargs=0,
                   help="Default entity name for clients/users/brokers/ips (applies to corresponding entity type)")
    p.add_argument("--add-config", help="Key Value pairs of configs to add. Square brackets can be used to group "
                                        "values which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'.")
    p.add_argument("--add-config-file", help="Path to a properties file with configs to add.")
    p.add_argument("--delete-config", help="config keys to remove 'k1,k2'")
    p.add_argument("--force", action="store_true", help="Suppress console prompts")
    for flag, _ in ENTITY_FLAGS:
        p.add_argument("--" + flag.replace("_", "-"), help=f"The {flag.replace('_', ' ')} entity's name.")
    for flag, entity in DEFAULT_FLAGS:
        p.add_argument("--" + flag.replace("_", "-"), action="store_true",
                       help=f"The config defaults for all {entity}.")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


# -- parsing (also used by twisted-kafka-scram) -----------------------------------------------------

#: Kafka splits --add-config at commas, and each pair at '=', outside square brackets.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's ``parseConfigsToBeAdded`` for ``--add-config``: ``k1=v1,k2=[v1,v2]`` -> ``{k1: v1, k2: "v1,v2"}``."""
    result: dict[str, str] = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise UsageError('requirement failed: Invalid entity config: all configs to be added must be in the '
                             'format "key=val".')
        key = pair[0].strip()
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise UsageError(f"Invalid character found for config key: {key}")
        result[key] = re.sub(r"[\[\]]", "", pair[1]).strip()
    return result


def parse_delete_config(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def scram_credential(mechanism: str, value: str) -> tuple[str, int]:
    """``(password, iterations)`` of one SCRAM credential value (``[iterations=N,]password=P``)."""
    # ``password=P,iterations=N`` (which twisted-kafka-scram has always read so) is taken as that, not as a
    # password ending in ",iterations=N" as Kafka's regex alone would.
    reversed_match = _SCRAM_VALUE_REVERSED.fullmatch(value)
    match = _SCRAM_VALUE.fullmatch(value)
    if reversed_match is not None:
        password, iterations_text = reversed_match.groups()
    elif match is not None:
        iterations_text, password = match.groups()
    else:
        raise UsageError(f"Invalid credential property {mechanism}=[{value}]: expected [iterations=N,]password=P")
    iterations = int(iterations_text) if iterations_text not in (None, "", "-1") else DEFAULT_ITERATIONS
    minimum = MECHANISMS[mechanism].min_iterations
    if iterations < minimum:
        raise UsageError(f"Iterations {iterations} is less than the minimum {minimum} required for {mechanism}")
    return password, iterations


def is_scram(key: str) -> bool:
    return key in MECHANISMS


# -- the command ------------------------------------------------------------------------------------

def entities(args) -> tuple[list[str], list[str]]:
    """Kafka's ``entityTypes`` / ``entityNames``."""
    types = list(args.entity_type)
    names = list(args.entity_names or [])
    for flag, entity in ENTITY_FLAGS:
        if getattr(args, flag) is not None:
            types.append(entity)
            names.append(getattr(args, flag))
    for flag, entity in DEFAULT_FLAGS:
        if getattr(args, flag):
            types.append(entity)
            names.append("")
    return types, names


def check_args(args) -> tuple[list[str], list[str]]:
    """Kafka's ``ConfigCommandOptions.checkArgs``."""
    if args.alter == args.describe:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config or args.delete_config or args.add_config_file):
        raise UsageError("--describe can't be used with --add-config, --add-config-file or --delete-config")
    if args.zookeeper:
        raise UsageError("--zookeeper is not supported (removed in Kafka 4.0); use --bootstrap-server, or "
                         "twisted-kafka-scram --zookeeper for SCRAM credentials of a cluster with no broker running")
    if args.bootstrap_controller:
        raise UsageError("--bootstrap-controller is not supported: this broker has no KRaft controllers; "
                         "use --bootstrap-server")
    if not args.bootstrap_server:
        raise UsageError("One of the required --bootstrap-server or --bootstrap-controller arguments must be "
                         "specified")
    types, names = entities(args)
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    for entity in types:
        if entity not in ENTITY_TYPES:
            raise UsageError(f"Invalid entity type {entity}, the entity type must be one of "
                             f"{', '.join(ENTITY_TYPES)} with a --bootstrap-server or --bootstrap-controller argument")
    if not types:
        raise UsageError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise UsageError("Only 'users' and 'clients' entity types may be specified together")
    specific = [flag for flag, _ in ENTITY_FLAGS + DEFAULT_FLAGS if getattr(args, flag) not in (None, False)]
    if (args.entity_type or args.entity_names) and specific:
        raise UsageError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    has_name = any(names)
    has_default = any(name == "" for name in names)
    if has_name and types[0] in (BROKERS, BROKER_LOGGERS):
        for name in names:
            if name and not name.lstrip("-").isdigit():
                raise UsageError(f"The entity name for {types[0]} must be a valid integer broker id, but it is: "
                                 f"{name}")
    if args.describe:
        if has_default and not {USERS, CLIENTS, BROKERS, IPS} & set(types):
            raise UsageError(f"--entity-default must not be specified with --describe of {','.join(types)}")
        if BROKER_LOGGERS in types and not has_name:
            raise UsageError(f"An entity name must be specified with --describe of {','.join(types)}")
    if args.alter:
        if {USERS, CLIENTS, BROKERS, IPS} & set(types):
            if not has_name and not has_default:
                raise UsageError("An entity-name or default entity must be specified with --alter of users, "
                                 "clients, brokers or ips")
        elif not has_name:
            raise UsageError(f"An entity name must be specified with --alter of {','.join(types)}")
        if args.add_config and args.add_config_file:
            raise UsageError("Only one of --add-config or --add-config-file must be specified")
        if not (args.add_config or args.add_config_file or args.delete_config):
            raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be "
                             "specified with --alter")
        if len(types) != len(names):
            raise UsageError("An entity name must be specified for every entity type")
    return types, names


class ConfigService:
    def __init__(self, admin: Admin, args, types: list[str], names: list[str]) -> None:
        self.admin = admin
        self.args = args
        self.types = types
        self.names = names

    # -- resource configs (topics, brokers, broker-loggers, groups) ----------------------------------

    def resource_config(self, entity_type: str, name: str, *, all_sources: bool) -> list[Entry]:
        """Kafka's ``getResourceConfig``: the entries of one resource, only its dynamic ones unless ``all``.

        DescribeConfigs goes out with kafka-python's message classes: confluent-kafka keys an entry's
        synonyms by name, which loses the layers of one key (``STATIC_BROKER_CONFIG:log.retention.hours``
        above ``DEFAULT_CONFIG:log.retention.hours``), and will not name the broker-default resource ("").
        """
        from kafka.protocol.admin.configs import DescribeConfigsRequest

        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=int(RESOURCE_TYPES[entity_type].value), resource_name=name, configuration_keys=None)
        response = self.send("DescribeConfigs", 32, DescribeConfigsRequest(resources=[resource], include_synonyms=True))
        entries = []
        for result in response.results:
            if result.error_code:
                raise ToolError(f"{entity_type[:-1]} {name}: {_error_text(result.error_code, result.error_message)}")
            for c in result.configs:
                entries.append(Entry(c.name, c.value, _source(c.config_source), c.is_sensitive,
                                     [(_source(s.source), s.name, s.value) for s in c.synonyms]))
        wanted = None if all_sources else _dynamic_source(entity_type, name)
        return sorted((e for e in entries if wanted is None or e.source == wanted), key=lambda e: e.name)

    def describe_resources(self) -> None:
        entity_type = self.types[0]
        if self.names:
            names = self.names[:1]
        elif entity_type == TOPICS:
            names = sorted(self.admin.list_topics().topics)
        elif entity_type == BROKERS:
            cluster = self.admin.wait(self.admin.client.describe_cluster(**self.admin.request_kwargs()),
                                      "the cluster's brokers")
            names = [str(node.id) for node in cluster.nodes] + [""]
        elif entity_type == GROUPS:
            listing = self.admin.wait(self.admin.client.list_consumer_groups(**self.admin.request_kwargs()),
                                      "the list of groups")
            names = sorted(g.group_id for g in listing.valid)
        else:
            raise ToolError(f"Invalid entity type: {entity_type}")
        for name in names:
            if name == "":
                print(f"Default configs for {entity_type} in the cluster are:")
            else:
                print(f"{'All' if self.args.all else 'Dynamic'} configs for {entity_type[:-1]} {name} are:")
            for entry in self.resource_config(entity_type, name, all_sources=self.args.all):
                synonyms = ", ".join(f"{source}:{key}={_value(value)}" for source, key, value in entry.synonyms)
                print(f"  {entry.name}={_value(entry.value)} sensitive={str(entry.is_sensitive).lower()} "
                      f"synonyms={{{synonyms}}}")

    def alter_resource(self, added: dict[str, str], deleted: list[str]) -> None:
        entity_type, name = self.types[0], self.names[0]
        current = {e.name for e in self.resource_config(entity_type, name, all_sources=False)}
        invalid = [k for k in deleted if k not in current]
        if invalid:
            raise ToolError(f"Invalid config(s): {','.join(invalid)}")
        if name == "":
            self.alter_default_broker(added, deleted)
            return
        operations = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in added.items()]
        operations += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deleted]
        resource = ConfigResource(RESOURCE_TYPES[entity_type], name, incremental_configs=operations)
        futures = self.admin.client.incremental_alter_configs([resource], **self.admin.request_kwargs())
        for future in futures.values():
            self.admin.wait(future, f"the change of {entity_type[:-1]} {name or '<default>'}")

    def alter_default_broker(self, added: dict[str, str], deleted: list[str]) -> None:
        from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest

        resource_class = IncrementalAlterConfigsRequest.AlterConfigsResource
        config = resource_class.AlterableConfig
        configs = [config(name=k, config_operation=0, value=v) for k, v in added.items()]
        configs += [config(name=k, config_operation=1, value=None) for k in deleted]
        request = IncrementalAlterConfigsRequest(
            resources=[resource_class(resource_type=4, resource_name="", configs=configs)], validate_only=False)
        response = self.send("IncrementalAlterConfigs", 44, request)
        for result in response.responses:
            if result.error_code:
                raise ToolError(_error_text(result.error_code, result.error_message))

    # -- quotas (Describe/AlterClientQuotas, kafka-python's message classes) -----------------------

    def quota_components(self) -> list:
        from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

        component = DescribeClientQuotasRequest.ComponentData
        components = []
        for index, entity_type in enumerate(self.types):
            name = self.names[index] if index < len(self.names) else None
            kind = QUOTA_ENTITIES[entity_type][0]
            if name is None:
                components.append(component(entity_type=kind, match_type=2, match=None))    # any entity of the type
            elif name == "":
                components.append(component(entity_type=kind, match_type=1, match=None))    # the default entity
            else:
                components.append(component(entity_type=kind, match_type=0, match=name))    # exactly this name
        return components

    def describe_quotas(self) -> dict[tuple, dict[str, float]]:
        from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

        request = DescribeClientQuotasRequest(components=self.quota_components(), strict=True)
        response = self.send("DescribeClientQuotas", 48, request)
        if response.error_code:
            raise ToolError(_error_text(response.error_code, response.error_message))
        return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
                for entry in response.entries}

    def print_quotas(self) -> None:
        labels = {kind: label for kind, label in QUOTA_ENTITIES.values()}
        for entity, values in self.describe_quotas().items():
            parts = dict(entity)
            described = []
            for kind in ("user", "client-id", "ip"):
                if kind in parts:
                    name = parts[kind]
                    described.append(f"{labels[kind]} '{name}'" if name is not None else f"the default {labels[kind]}")
            entries = ", ".join(f"{k}={v}" for k, v in values.items())
            print(f"Quota configs for {', '.join(described)} are {entries}")

    def alter_quotas(self, added: dict[str, str], deleted: list[str]) -> None:
        from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest

        current = next(iter(self.describe_quotas().values()), {})
        invalid = [k for k in deleted if k not in current]
        if invalid:
            raise ToolError(f"Invalid config(s): {','.join(invalid)}")
        entry = AlterClientQuotasRequest.EntryData
        operations = []
        for key, value in added.items():
            try:
                operations.append(entry.OpData(key=key, value=float(value), remove=False))
            except ValueError:
                raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
        operations += [entry.OpData(key=key, value=0.0, remove=True) for key in deleted]
        entity = [entry.EntityData(entity_type=QUOTA_ENTITIES[t][0], entity_name=n or None)
                  for t, n in zip(self.types, self.names, strict=True)]
        request = AlterClientQuotasRequest(entries=[entry(entity=entity, ops=operations)], validate_only=False)
        response = self.send("AlterClientQuotas", 49, request)
        for result in response.entries:
            if result.error_code:
                raise ToolError(_error_text(result.error_code, result.error_message))

    def send(self, api: str, key: int, request):
        return self.admin.send(api, key, request)

    # -- users: SCRAM credentials ------------------------------------------------------------------

    def describe_users(self) -> None:
        self.print_quotas()
        if CLIENTS in self.types or "" in self.names:
            return
        users = [name for name in self.names if name] or None
        descriptions: dict[str, tuple[Any, str | None]] = {}
        if users is None:
            timeout = self.admin.settings.timeout
            everyone = self.admin.client.describe_user_scram_credentials(None, request_timeout=timeout)
            answer = self.admin.wait(everyone, "the SCRAM credentials")  # type: ignore[arg-type]
            descriptions = {user: (description, None) for user, description in answer.items()}
        else:
            futures = self.admin.client.describe_user_scram_credentials(users,
                                                                        request_timeout=self.admin.settings.timeout)
            for user, future in futures.items():  # type: ignore[union-attr]
                try:
                    descriptions[user] = (self.admin.wait(future, f"the SCRAM credentials of {user}"), None)
                except ToolError as exc:
                    descriptions[user] = (None, str(exc))
        for user in sorted(descriptions):
            description, error = descriptions[user]
            if error is not None:
                print(f"Error retrieving SCRAM credential configs for user-principal '{user}': {error}")
                continue
            infos = ", ".join(f"{_mechanism_name(info.mechanism)}=iterations={info.iterations}"
                              for info in description.scram_credential_infos)
            print(f"SCRAM credential configs for user-principal '{user}' are {infos}")

    def alter_users(self, added: dict[str, str], deleted: list[str]) -> None:
        scram_added = {k: v for k, v in added.items() if is_scram(k)}
        scram_deleted = [k for k in deleted if is_scram(k)]
        quota_keys = CLIENT_QUOTA_KEYS
        unknown = [k for k in [*added, *deleted] if not is_scram(k) and k not in quota_keys]
        clients = self.types[0] == CLIENTS or len(self.types) == 2
        if clients and (unknown or scram_added or scram_deleted):
            bad = [k for k in [*added, *deleted] if k not in quota_keys]
            raise UsageError(f"Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
                             f"config names: {','.join(bad)}")
        if unknown:
            raise UsageError("Only quota and SCRAM credential configs can be added for 'users' using "
                             f"--bootstrap-server. Unexpected config names: {','.join(unknown)}")
        quotas = any(k in quota_keys for k in [*added, *deleted])
        if scram_added or scram_deleted:
            if "" in self.names:
                raise UsageError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                                 "Credentials using --bootstrap-server.")
            if quotas:
                raise UsageError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                                 "using --bootstrap-server.")
            self.alter_scram(self.names[0], {m: scram_credential(m, v) for m, v in scram_added.items()},
                             scram_deleted)
        else:
            self.alter_quotas(added, deleted)

    def alter_scram(self, user: str, added: dict[str, tuple[str, int]], deleted: list[str]) -> None:
        alterations: list = [UserScramCredentialDeletion(user, _mechanism(m)) for m in deleted]
        alterations += [UserScramCredentialUpsertion(user, ScramCredentialInfo(_mechanism(m), iterations),
                                                     password.encode())
                        for m, (password, iterations) in added.items()]
        futures = self.admin.client.alter_user_scram_credentials(alterations, **self.admin.request_kwargs())
        for future in futures.values():
            self.admin.wait(future, f"the change of user {user}'s SCRAM credentials")

    # -- dispatch ----------------------------------------------------------------------------------

    def describe(self) -> None:
        entity_type = self.types[0]
        if entity_type in RESOURCE_TYPES:
            self.describe_resources()
        elif entity_type in (USERS, CLIENTS):
            self.describe_users()
        elif entity_type == IPS:
            self.print_quotas()
        else:
            raise ToolError(f"{entity_type} configs are not supported by this tool")

    def alter(self) -> None:
        added = parse_add_config(self.args.add_config) if self.args.add_config else {}
        if self.args.add_config_file:
            added.update(load_client_properties(self.args.add_config_file))
        deleted = parse_delete_config(self.args.delete_config)
        entity_type, name = self.types[0], self.names[0]
        if entity_type in RESOURCE_TYPES:
            self.alter_resource(added, deleted)
        elif entity_type in (USERS, CLIENTS):
            self.alter_users(added, deleted)
        elif entity_type == IPS:
            unknown = [k for k in [*added, *deleted] if k not in IP_QUOTA_KEYS]
            if unknown:
                raise UsageError("Only connection quota configs can be added for 'ips' using --bootstrap-server. "
                                 f"Unexpected config names: {','.join(unknown)}")
            self.alter_quotas(added, deleted)
        else:
            raise ToolError(f"{entity_type} configs are not supported by this tool")
        if name:
            print(f"Completed updating config for {entity_type[:-1]} {name}.")
        else:
            print(f"Completed updating default config for {entity_type} in the cluster.")


@dataclass
class Entry:
    """One config entry as ConfigCommand prints it; synonyms are (source, name, value)."""

    name: str
    value: str | None
    source: str
    is_sensitive: bool
    synonyms: list[tuple[str, str, str | None]]


def _source(source) -> str:
    """Kafka's ConfigSource name (``DYNAMIC_TOPIC_CONFIG``, ...) of a wire value or librdkafka's enum."""
    try:
        return ConfigSource(int(source)).name
    except ValueError:
        return "UNKNOWN_CONFIG"


def _dynamic_source(entity_type: str, name: str) -> str | None:
    if entity_type == TOPICS:
        return "DYNAMIC_TOPIC_CONFIG"
    if entity_type == BROKERS:
        return "DYNAMIC_DEFAULT_BROKER_CONFIG" if name == "" else "DYNAMIC_BROKER_CONFIG"
    if entity_type == GROUPS:
        return "GROUP_CONFIG"
    return None


def _value(value: str | None) -> str:
    return "null" if value is None else value


def _mechanism(name: str) -> ScramMechanism:
    return ScramMechanism[name.replace("-", "_")]


def _mechanism_name(mechanism: ScramMechanism) -> str:
    return mechanism.name.replace("_", "-")


def _error_text(code: int, message: str | None) -> str:
    from twisted_kafka.protocol.errors import ErrorCode

    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{message} ({name})" if message else name


def execute(argv: list[str] | None) -> None:
    args = parser().parse(argv)
    types, names = check_args(args)
    with Admin(client_settings(args.bootstrap_server, args.command_config, client_id="configs-tool")) as admin:
        service = ConfigService(admin, args, types, names)
        if args.alter:
            service.alter()
        else:
            service.describe()


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv))


if __name__ == "__main__":
    sys.exit(main())
