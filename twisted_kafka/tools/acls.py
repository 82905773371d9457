"""``twisted-kafka-acls``: Kafka's ``kafka-acls.sh`` (``AclCommand``): add, remove and list ACLs.

    twisted-kafka-acls --bootstrap-server HOST:PORT --add --allow-principal User:alice [--allow-host H]
        --operation Read [--operation Describe] (--topic T | --group G | --cluster | --transactional-id X)
        [--resource-pattern-type literal|prefixed]
    twisted-kafka-acls --bootstrap-server HOST:PORT --add --allow-principal User:alice --producer --topic T \
        [--idempotent]
    twisted-kafka-acls --bootstrap-server HOST:PORT --add --allow-principal User:bob --consumer --topic T --group G
    twisted-kafka-acls --bootstrap-server HOST:PORT --remove [--force] ... (as --add; without principals, every
        ACL of the resource filter)
    twisted-kafka-acls --bootstrap-server HOST:PORT --list [--topic T ...] [--resource-pattern-type any|match|...]
        [--principal User:alice]

ACLs travel as CreateAcls / DescribeAcls / DeleteAcls; the lines printed
are Kafka's, with its ``ResourcePattern(resourceType=TOPIC, name=t,
patternType=LITERAL)`` and ``(principal=User:alice, host=*,
operation=READ, permissionType=ALLOW)`` forms.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from .admin import Admin
from .client_config import client_settings
from .command import KafkaArgumentParser, UsageError, refuse_with, run_tool

PROG = "twisted-kafka-acls"
CLUSTER_NAME = "kafka-cluster"
#: Kafka's resource type names; CLUSTER is librdkafka's BROKER (both 4 on the wire).
TYPE_NAMES = {ResourceType.TOPIC: "TOPIC", ResourceType.GROUP: "GROUP", ResourceType.BROKER: "CLUSTER",
              ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID", ResourceType.ANY: "ANY",
              ResourceType.UNKNOWN: "UNKNOWN"}
#: Kafka's AclEntry.supportedOperations, ALL added as AclCommand does.
SUPPORTED = {
    ResourceType.TOPIC: {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS",
                         "ALTER_CONFIGS"},
    ResourceType.GROUP: {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    ResourceType.BROKER: {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
                          "ALTER", "DESCRIBE"},
    ResourceType.TRANSACTIONAL_ID: {"DESCRIBE", "WRITE"},
}
OPERATIONS = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


def pascal(name: str) -> str:
    """Kafka's ``SecurityUtils.toPascalCase``: ``DESCRIBE_CONFIGS`` -> ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in name.split("_"))


def parse_operation(text: str) -> AclOperation:
    """Kafka's ``SecurityUtils.operation``: ``Read``, ``DescribeConfigs`` or their upper case (also ``READ``,
    ``DESCRIBE_CONFIGS``)."""
    wanted = text.strip().replace("_", "").upper()
    for operation in OPERATIONS:
        if operation.name.replace("_", "") == wanted:
            return operation
    raise UsageError(f"Unknown operation '{text}'. Valid operation names are: "
                     + ", ".join(pascal(op.name) for op in OPERATIONS))


def parse_principal(text: str) -> str:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: ``principalType:name``."""
    text = text.strip()
    if ":" not in text or not text:
        raise UsageError(f"expected a string in format principalType:principalName but got {text}")
    return text


def parse_pattern_type(text: str) -> ResourcePatternType:
    for pattern in ResourcePatternType:
        if pattern != ResourcePatternType.UNKNOWN and pattern.name == text.strip().upper():
            return pattern
    raise UsageError(f"Unknown resource-pattern-type: {text}")


@dataclass(frozen=True)
class Resource:
    """A resource pattern or filter, printed as Kafka's ``ResourcePattern(...)``."""

    type: ResourceType
    name: str | None
    pattern: ResourcePatternType

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={TYPE_NAMES[self.type]}, "
                f"name={'<any>' if self.name is None else self.name}, patternType={self.pattern.name})")


@dataclass(frozen=True)
class Entry:
    """An access control entry, printed as Kafka's ``AccessControlEntry``."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission.name})")


def acl_filter(resource: Resource, entry: Entry | None = None) -> AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter: the resource (None: any name), and one entry or any."""
    if entry is None:
        return AclBindingFilter(resource.type, resource.name, resource.pattern,  # type: ignore[arg-type]
                                None, None, AclOperation.ANY, AclPermissionType.ANY)  # type: ignore[arg-type]
    return AclBindingFilter(resource.type, resource.name, resource.pattern,  # type: ignore[arg-type]
                            entry.principal, entry.host, entry.operation, entry.permission)


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to manage acls on kafka.")
    p.add_argument("--bootstrap-server", help="A list of host/port pairs to use for establishing the connection "
                                              "to the Kafka cluster.")
    p.add_argument("--bootstrap-controller", help="Not supported here: use --bootstrap-server.")
    p.add_argument("--command-config", help="A property file containing configs to be passed to Admin Client.")
    p.add_argument("--topic", action="append", help="topic to which ACLs should be added or removed. A value of "
                                                    "'*' indicates ACL should apply to all topics.")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--group", action="append", help="Consumer Group to which the ACLs should be added or removed.")
    p.add_argument("--transactional-id", action="append", help="The transactionalId to which ACLs should be added "
                                                               "or removed.")
    p.add_argument("--idempotent", action="store_true", help="Enable idempotence for the producer (with --producer).")
    p.add_argument("--delegation-token", action="append", help="Not supported here (no delegation tokens).")
    p.add_argument("--user-principal", action="append", help="Not supported here (no delegation tokens).")
    p.add_argument("--resource-pattern-type", default="literal",
                   help="literal or prefixed when adding; also any or match when listing or removing.")
    p.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    p.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    p.add_argument("--list", action="store_true", help="List ACLs for the specified resource.")
    p.add_argument("--operation", action="append", help="Operation that is being allowed or denied (default All).")
    p.add_argument("--allow-principal", action="append", help="principal is in principalType:name format.")
    p.add_argument("--deny-principal", action="append", help="principal is in principalType:name format.")
    p.add_argument("--principal", action="append", help="List ACLs for the specified principal.")
    p.add_argument("--allow-host", action="append", help="Host from which principals listed in --allow-principal "
                                                         "will have access (default *).")
    p.add_argument("--deny-host", action="append", help="Host from which principals listed in --deny-principal "
                                                        "will be denied access (default *).")
    p.add_argument("--producer", action="store_true", help="Convenience option to add/remove ACLs for producer "
                                                           "role (Write, Describe, Create on topic).")
    p.add_argument("--consumer", action="store_true", help="Convenience option to add/remove ACLs for consumer "
                                                           "role (Read, Describe on topic, Read on group).")
    p.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


def check_args(args) -> str:
    """Kafka's ``AclCommandOptions.checkArgs``; the chosen action."""
    if args.bootstrap_controller:
        raise UsageError("--bootstrap-controller is not supported: use --bootstrap-server")
    if not args.bootstrap_server:
        raise UsageError("One of --bootstrap-server or --bootstrap-controller must be specified")
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    refuse_with(args, "list", ["producer", "consumer", "allow-host", "allow-principal", "deny-host",
                               "deny-principal"])
    refuse_with(args, "producer", ["operation", "deny-principal", "deny-host"])
    refuse_with(args, "consumer", ["operation", "deny-principal", "deny-host"])
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")
    if args.delegation_token or args.user_principal:
        raise UsageError("--delegation-token and --user-principal are not supported: this broker has no "
                         "delegation tokens")
    return actions[0]


class AclService:
    def __init__(self, admin: Admin, args) -> None:
        self.admin = admin
        self.args = args
        self.pattern = parse_pattern_type(args.resource_pattern_type)

    def resources(self, required: bool = True) -> list[Resource]:
        """Kafka's ``getResourceFilter``."""
        args, pattern = self.args, self.pattern
        found = [Resource(ResourceType.TOPIC, t.strip(), pattern) for t in args.topic or []]
        if pattern == ResourcePatternType.LITERAL and (args.cluster or args.idempotent):
            found.append(Resource(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL))
        found += [Resource(ResourceType.GROUP, g.strip(), pattern) for g in args.group or []]
        found += [Resource(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id or []]
        if not found and required:
            raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group "
                             "<group> or --delegation-token <Delegation Token ID>")
        return list(dict.fromkeys(found))

    def entries(self, operations: list[AclOperation]) -> list[Entry]:
        """Kafka's ``getAcl``: every (principal, operation, host) of the allow and deny flags."""
        args = self.args
        allowed = [parse_principal(p) for p in args.allow_principal or []]
        denied = [parse_principal(p) for p in args.deny_principal or []]
        allow_hosts = [h.strip() for h in args.allow_host] if args.allow_host else (["*"] if allowed else [])
        deny_hosts = [h.strip() for h in args.deny_host] if args.deny_host else (["*"] if denied else [])
        entries = [Entry(p, h, op, AclPermissionType.ALLOW) for p in allowed for op in operations for h in allow_hosts]
        entries += [Entry(p, h, op, AclPermissionType.DENY) for p in denied for op in operations for h in deny_hosts]
        return list(dict.fromkeys(entries))

    def resource_acls(self) -> dict[Resource, list[Entry]]:
        """Kafka's ``getResourceFilterToAcls`` (with the --producer / --consumer roles)."""
        args = self.args
        result: dict[Resource, list[Entry]] = {}
        if not args.producer and not args.consumer:
            operations = [parse_operation(o) for o in args.operation or ["All"]]
            for resource in self.resources():
                result[resource] = self.entries(list(dict.fromkeys(operations)))
        if args.producer:
            for resource in self.resources():
                if resource.type == ResourceType.TOPIC:
                    result[resource] = self.entries([AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
                elif resource.type == ResourceType.TRANSACTIONAL_ID:
                    result[resource] = self.entries([AclOperation.WRITE, AclOperation.DESCRIBE])
            if args.idempotent:
                cluster = Resource(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL)
                result[cluster] = self.entries([AclOperation.IDEMPOTENT_WRITE])
        if args.consumer:
            for resource in self.resources():
                if resource.type == ResourceType.TOPIC:
                    result[resource] = list(dict.fromkeys(
                        self.entries([AclOperation.READ, AclOperation.DESCRIBE]) + result.get(resource, [])))
                elif resource.type == ResourceType.GROUP:
                    result[resource] = self.entries([AclOperation.READ])
        for resource, entries in result.items():
            valid = SUPPORTED.get(resource.type, set()) | {"ALL"}
            if any(e.operation.name not in valid for e in entries):
                raise UsageError(f"ResourceType {TYPE_NAMES[resource.type]} only supports operations "
                                 + ", ".join(sorted(pascal(o) for o in valid)))
        return result

    # -- actions ----------------------------------------------------------------------------------

    def add(self) -> None:
        if self.pattern.name not in ("LITERAL", "PREFIXED"):
            raise UsageError(f"A '--resource-pattern-type' value of '{self.pattern.name}' is not valid when "
                             "adding acls.")
        resource_acls = self.resource_acls()
        if any(not entries for entries in resource_acls.values()):
            raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        for resource, entries in resource_acls.items():
            print(f"Adding ACLs for resource `{resource}`: \n " + "\n".join(f"\t{e}" for e in entries) + " \n")
            bindings = [AclBinding(resource.type, resource.name or "", resource.pattern, e.principal, e.host,
                                   e.operation, e.permission) for e in entries]
            futures = self.admin.client.create_acls(bindings, **self.admin.request_kwargs())
            for future in futures.values():
                self.admin.wait(future, "the new ACLs")

    def remove(self) -> None:
        for resource, entries in self.resource_acls().items():
            if not entries:
                question = f"Are you sure you want to delete all ACLs for resource filter `{resource}`? (y/n)"
                filters = [acl_filter(resource)]
            else:
                question = ("Are you sure you want to remove ACLs: \n " + "\n".join(f"\t{e}" for e in entries)
                            + f" \n from resource filter `{resource}`? (y/n)")
                filters = [acl_filter(resource, e) for e in entries]
            if not self.confirm(question):
                continue
            futures = self.admin.client.delete_acls(filters, **self.admin.request_kwargs())
            for future in futures.values():
                self.admin.wait(future, "the removal of ACLs")

    def confirm(self, question: str) -> bool:
        if self.args.force:
            return True
        print(question)
        answer = sys.stdin.readline()
        return answer.strip().lower() == "y"

    def list_acls(self) -> None:
        filters = self.resources(required=False)
        if filters:
            bindings: list[AclBinding] = []
            for resource in filters:
                bindings += self.describe(acl_filter(resource))
        else:
            bindings = self.describe(acl_filter(Resource(ResourceType.ANY, None, ResourcePatternType.ANY)))
        by_resource: dict[Resource, list[Entry]] = {}
        for b in bindings:
            resource = Resource(ResourceType(b.restype), b.name, ResourcePatternType(b.resource_pattern_type))
            entry = Entry(b.principal, b.host, AclOperation(b.operation), AclPermissionType(b.permission_type))
            if entry not in by_resource.setdefault(resource, []):
                by_resource[resource].append(entry)
        principals = [parse_principal(p) for p in self.args.principal or []]
        if not principals:
            self.print_acls(by_resource)
            return
        for principal in principals:
            print(f"ACLs for principal `{principal}`")
            self.print_acls({r: [e for e in entries if e.principal == principal]
                             for r, entries in by_resource.items()
                             if any(e.principal == principal for e in entries)})

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return list(self.admin.wait(self.admin.client.describe_acls(binding_filter, **self.admin.request_kwargs()),
                                    "the ACLs"))

    @staticmethod
    def print_acls(by_resource: dict[Resource, list[Entry]]) -> None:
        for resource, entries in by_resource.items():
            print(f"Current ACLs for resource `{resource}`: \n " + "\n".join(f"\t{e}" for e in entries) + " \n")


def execute(argv: list[str] | None) -> None:
    args = parser().parse(argv)
    action = check_args(args)
    with Admin(client_settings(args.bootstrap_server, args.command_config, client_id="acls-tool")) as admin:
        getattr(AclService(admin, args), "list_acls" if action == "list" else action)()


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv), error_prefix="Error while executing ACL command: ")


if __name__ == "__main__":
    sys.exit(main())
