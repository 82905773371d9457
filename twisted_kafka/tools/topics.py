"""``twisted-kafka-topics``: Kafka's ``kafka-topics.sh`` (``TopicCommand``) -- create, delete, describe, alter, list.

Flags, checks and printed lines are Kafka's::

    twisted-kafka-topics --bootstrap-server HOST:PORT --create --topic t --partitions 3 --replication-factor 1 \\
        [--config k=v ...] [--replica-assignment 1:2,2:3] [--if-not-exists]
    twisted-kafka-topics --bootstrap-server HOST:PORT --describe [--topic REGEX] [--under-replicated-partitions |
        --unavailable-partitions | --under-min-isr-partitions | --at-min-isr-partitions | --topics-with-overrides]
    twisted-kafka-topics --bootstrap-server HOST:PORT --alter --topic t --partitions 6
    twisted-kafka-topics --bootstrap-server HOST:PORT --delete --topic REGEX [--if-exists]
    twisted-kafka-topics --bootstrap-server HOST:PORT --list [--topic REGEX] [--exclude-internal]

``--topic`` is a regular expression matched against whole names (commas
mean "or"), except with ``--create``; ``--describe`` prints, per topic,
``Topic: t<TAB>TopicId: ...<TAB>PartitionCount: n<TAB>ReplicationFactor: r<TAB>Configs: k=v,...``
and a line per partition.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from confluent_kafka import TopicCollection
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic, ResourceType

from .admin import Admin, UnsupportedApi
from .client_config import client_settings
from .command import KafkaArgumentParser, ToolError, UsageError, exactly_one, refuse_with, require, run_tool
from .output import kafka_uuid

PROG = "twisted-kafka-topics"
ACTIONS = ("create", "list", "alter", "describe", "delete")
REPORTS = ("under_replicated_partitions", "under_min_isr_partitions", "at_min_isr_partitions",
           "unavailable_partitions")
CONFIGS_TOOL_HINT = " (To alter topic configurations, twisted-kafka-configs can be used.)"
SHORT_MAX = 32767


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to create, delete, describe, or change a topic.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    for action, text in (("list", "List all available topics."), ("create", "Create a new topic."),
                         ("delete", "Delete a topic."),
                         ("alter", "Alter the number of partitions and replica assignment."),
                         ("describe", "List details for the given topics.")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--topic", help="The topic to create, alter, describe or delete. It also accepts a regular "
                                   "expression, except for --create option.")
    p.add_argument("--topic-id", help="The topic-id to describe.")
    p.add_argument("--config", action="append", metavar="name=value",
                   help="A topic configuration override for the topic being created (with --create only).")
    p.add_argument("--delete-config", help="No longer supported (Kafka 4.0): use twisted-kafka-configs.")
    p.add_argument("--partitions", type=int, help="The number of partitions for the topic being created or altered.")
    p.add_argument("--replication-factor", type=int, help="The replication factor for each partition.")
    p.add_argument("--replica-assignment", metavar="b1:b2,b3:b4,...",
                   help="A list of manual partition-to-broker assignments for the topic being created or altered.")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="If set when describing topics, only show under-replicated partitions.")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="If set when describing topics, only show partitions whose leader is not available.")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="If set when describing topics, only show partitions whose isr count is less than "
                        "the configured minimum.")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="If set when describing topics, only show partitions whose isr count is equal to "
                        "the configured minimum.")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="If set when describing topics, only show topics that have overridden configs.")
    p.add_argument("--if-exists", action="store_true",
                   help="If set when altering or deleting or describing topics, the action will only execute "
                        "if the topic exists.")
    p.add_argument("--if-not-exists", action="store_true",
                   help="If set when creating topics, the action will only execute if the topic does not "
                        "already exist.")
    p.add_argument("--exclude-internal", action="store_true",
                   help="Exclude internal topics when listing or describing topics.")
    p.add_argument("--partition-size-limit-per-response", type=int,
                   help="Accepted for compatibility (DescribeTopicPartitions paging); no effect here.")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


def check_args(args) -> str:
    """Kafka's ``TopicCommandOptions.checkArgs``; the chosen action."""
    action = exactly_one(args, ACTIONS, "Command must include exactly one action: --list, --describe, --create, "
                                        "--alter or --delete")
    if args.delete_config:
        raise UsageError("delete-config option is no longer supported and deprecated since version 4.0; "
                         "use twisted-kafka-configs --alter --delete-config")
    if not args.bootstrap_server:
        raise UsageError("--bootstrap-server must be specified")
    if action not in ("list", "describe"):
        require(args, "topic")
    if action == "alter":
        if args.config:
            raise UsageError('Option "[config]" can\'t be used with option "[alter]"' + CONFIGS_TOOL_HINT)
        require(args, "partitions")
    others = [a for a in ACTIONS]
    refuse_with(args, "config", [a for a in others if a not in ("alter", "create")])
    refuse_with(args, "partitions", [a for a in others if a not in ("alter", "create")])
    refuse_with(args, "replication-factor", [a for a in others if a != "create"])
    refuse_with(args, "replica-assignment", [a for a in others if a not in ("alter", "create")])
    if action == "create":
        refuse_with(args, "replica-assignment", ["partitions", "replication-factor"])
    for report in REPORTS:
        refuse_with(args, report.replace("_", "-"),
                    [a for a in others if a != "describe"] + ["topics-with-overrides"])
    refuse_with(args, "topics-with-overrides", [a for a in others if a != "describe"]
                + [r.replace("_", "-") for r in REPORTS])
    refuse_with(args, "if-exists", [a for a in others if a not in ("alter", "delete", "describe")])
    refuse_with(args, "if-not-exists", [a for a in others if a != "create"])
    refuse_with(args, "exclude-internal", [a for a in others if a not in ("list", "describe")])
    return action


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's ``parseReplicaAssignment``: ``1:2,2:3`` -> ``{0: [1, 2], 1: [2, 3]}``."""
    result: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise UsageError(f"--replica-assignment: {part!r} is not a list of broker ids") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise ToolError("Partition replica lists may not contain duplicate entries: "
                            + ",".join(map(str, duplicates)))
        result[index] = brokers
        if len(brokers) != len(result[0]):
            raise ToolError(f"Partition {index} has different replication factor: {brokers}")
    return result


def parse_topic_configs(entries: list[str] | None) -> dict[str, str]:
    configs: dict[str, str] = {}
    for entry in entries or []:
        pair = re.split(r"\s*=\s*", entry)
        if len(pair) != 2:
            raise UsageError('requirement failed: Invalid topic config: all configs to be added must be in the '
                             'format "key=val".')
        configs[pair[0].strip()] = pair[1].strip()
    return configs


def include_list(pattern: str | None) -> re.Pattern[str] | None:
    """Kafka's ``IncludeList``: commas mean "or", quotes and spaces are dropped, the whole name must match."""
    if pattern is None:
        return None
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", pattern.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error as exc:
        raise UsageError(f"--topic: {pattern!r} is not a valid regular expression: {exc}") from None


def is_internal(topic: str) -> bool:
    # Imported when asked for: the controller interface loads the protocol codec (and kafka-python), a
    # second of start-up that --list and --create do not need.
    from twisted_kafka.controller.interface import INTERNAL_TOPICS

    return topic in INTERNAL_TOPICS


class TopicService:
    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def topics(self, pattern: str | None, exclude_internal: bool) -> list[str]:
        """Kafka's ``getTopics``: sorted names matching ``pattern``."""
        metadata = self.admin.list_topics()
        regex = include_list(pattern)
        return [name for name in sorted(metadata.topics)
                if (regex is None or regex.fullmatch(name)) and not (exclude_internal and is_internal(name))]

    def ensure_found(self, found: list[str], requested: str | None, required: bool) -> None:
        if requested and required and not found:
            raise ToolError(f"Topic '{requested}' does not exist as expected")

    # -- actions ------------------------------------------------------------------------------

    def create(self, args) -> None:
        name = args.topic
        if "." in name or "_" in name:
            print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                  "could collide. To avoid issues it is best to use either, but not both.")
        if args.replication_factor is not None and not 1 <= args.replication_factor <= SHORT_MAX:
            raise UsageError(f"The replication factor must be between 1 and {SHORT_MAX} inclusive")
        if args.partitions is not None and args.partitions < 1:
            raise UsageError("The partitions must be greater than 0")
        configs = parse_topic_configs(args.config)
        if args.replica_assignment:
            assignment = parse_replica_assignment(args.replica_assignment)
            # librdkafka wants the partition count the assignment implies (and no replication factor)
            topic = NewTopic(name, num_partitions=len(assignment), replication_factor=-1,
                             replica_assignment=[assignment[p] for p in sorted(assignment)], config=configs)
        else:
            topic = NewTopic(name, num_partitions=args.partitions if args.partitions is not None else -1,
                             replication_factor=args.replication_factor or -1, config=configs)
        futures = self.admin.client.create_topics([topic], **self.admin.request_kwargs())
        try:
            self.admin.wait(futures[name], f"the creation of topic {name}")
        except ToolError as exc:
            if args.if_not_exists and "TOPIC_ALREADY_EXISTS" in str(exc):
                return
            raise
        print(f"Created topic {name}.")

    def alter(self, args) -> None:
        topics = self.topics(args.topic, args.exclude_internal)
        self.ensure_found(topics, args.topic, not args.if_exists)
        if not topics:
            return
        assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
        descriptions = self.describe_topics(topics)
        requests = []
        for name in topics:
            if assignment is not None:
                current = len(descriptions[name].partitions)
                new = [assignment[p] for p in sorted(assignment) if p >= current]
                requests.append(NewPartitions(name, args.partitions, new))
            else:
                requests.append(NewPartitions(name, args.partitions))
        futures = self.admin.client.create_partitions(requests, **self.admin.request_kwargs())
        for name, future in futures.items():
            self.admin.wait(future, f"the new partitions of {name}")

    def delete(self, args) -> None:
        topics = self.topics(args.topic, args.exclude_internal)
        self.ensure_found(topics, args.topic, not args.if_exists)
        if not topics:
            return
        futures = self.admin.client.delete_topics(topics, **self.admin.request_kwargs())
        for name, future in futures.items():
            self.admin.wait(future, f"the deletion of topic {name}")

    def list_topics(self, args) -> None:
        print("\n".join(self.topics(args.topic, args.exclude_internal)))

    def describe_topics(self, names: list[str]) -> dict:
        futures = self.admin.client.describe_topics(TopicCollection(names), **self.admin.request_kwargs())
        return {name: self.admin.wait(future, f"the description of topic {name}") for name, future in futures.items()}

    def describe(self, args) -> None:
        if args.topic_id:
            listed = self.describe_topics(self.topics(None, args.exclude_internal))
            descriptions = {n: d for n, d in listed.items() if kafka_uuid(d.topic_id) == args.topic_id}
            if not descriptions and not args.if_exists:
                raise ToolError(f"TopicId '{args.topic_id}' does not exist as expected")
        else:
            topics = self.topics(args.topic, args.exclude_internal)
            self.ensure_found(topics, args.topic, not args.if_exists)
            descriptions = self.describe_topics(topics) if topics else {}
        if not descriptions:
            return
        configs = self.topic_configs(list(descriptions))
        live = {node.id for node in self.admin.wait(self.admin.client.describe_cluster(**self.admin.request_kwargs()),
                                                    "the cluster's brokers").nodes}
        reassignments = self.reassignments(descriptions)
        reports = [r for r in REPORTS if getattr(args, r)]
        describe_configs = not reports
        describe_partitions = not args.topics_with_overrides
        for name, description in descriptions.items():
            partitions = sorted(description.partitions, key=lambda p: p.id)
            entries = configs[name]
            if describe_configs:
                overrides = [(k, e.value) for k, e in entries.items() if not e.is_default]
                if (not args.topics_with_overrides or overrides) and partitions:
                    first = PartitionView(name, partitions[0], entries, reassignments.get((name, partitions[0].id)))
                    line = f"Topic: {name}"
                    if kafka_uuid(description.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA":
                        line += f"\tTopicId: {kafka_uuid(description.topic_id)}"
                    line += (f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {first.replication_factor}"
                             f"\tConfigs: {','.join(f'{k}={v}' for k, v in overrides)}")
                    print(line)
            if describe_partitions:
                for partition in partitions:
                    view = PartitionView(name, partition, entries, reassignments.get((name, partition.id)))
                    if describe_configs or any(view.reported(r, live) for r in reports):
                        print(view.line())

    def topic_configs(self, names: list[str]) -> dict[str, dict]:
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
        futures = self.admin.client.describe_configs(resources, **self.admin.request_kwargs())
        return {resource.name: self.admin.wait(future, f"the configs of topic {resource.name}")
                for resource, future in futures.items()}

    def reassignments(self, descriptions: dict) -> dict[tuple[str, int], dict]:
        """Ongoing reassignments of these partitions (ListPartitionReassignments); none where the broker
        lacks the API or the principal may not describe the cluster, as Kafka's tool ignores an
        UnsupportedVersionException or ClusterAuthorizationException there."""
        partitions = {name: [p.id for p in d.partitions] for name, d in descriptions.items()}
        try:
            admin = self.admin.kafka_python()
            found = self.admin.call("ListPartitionReassignments", 46, admin.list_partition_reassignments, partitions)
        except UnsupportedApi:
            return {}
        except ToolError as exc:
            if "CLUSTER_AUTHORIZATION_FAILED" in str(exc):     # Kafka's tool ignores this refusal too
                return {}
            raise
        return {(tp.topic, tp.partition): state for tp, state in found.items()}


@dataclass
class PartitionView:
    """Kafka's ``PartitionDescription``: one partition's state and the checks the reports filter on."""

    topic: str
    info: object
    configs: dict
    reassignment: dict | None

    @property
    def replicas(self) -> list[int]:
        return [node.id for node in self.info.replicas]  # type: ignore[attr-defined]

    @property
    def isr(self) -> list[int]:
        return [node.id for node in self.info.isr]  # type: ignore[attr-defined]

    @property
    def leader(self) -> int | None:
        leader = self.info.leader  # type: ignore[attr-defined]
        return None if leader is None or leader.id < 0 else leader.id

    def reassigning(self) -> bool:
        if not self.reassignment:
            return False
        changing = set(self.reassignment["adding_replicas"]) | set(self.reassignment["removing_replicas"])
        return bool(set(self.replicas) & changing)

    @property
    def replication_factor(self) -> int:
        if self.reassigning():
            assert self.reassignment is not None
            return len(self.reassignment["replicas"]) - len(self.reassignment["adding_replicas"])
        return len(self.replicas)

    def min_isr(self) -> int:
        entry = self.configs.get("min.insync.replicas")
        return int(entry.value) if entry is not None and entry.value is not None else 1

    def reported(self, report: str, live: set[int]) -> bool:
        if report == "under_replicated_partitions":
            return self.replication_factor - len(self.isr) > 0
        if report == "unavailable_partitions":
            return self.leader is None or self.leader not in live
        if report == "under_min_isr_partitions":
            return self.leader is None or len(self.isr) < self.min_isr()
        return len(self.isr) == self.min_isr()     # at_min_isr_partitions

    def line(self) -> str:
        text = (f"\tTopic: {self.topic}\tPartition: {self.info.id}"  # type: ignore[attr-defined]
                f"\tLeader: {self.leader if self.leader is not None else 'none'}"
                f"\tReplicas: {','.join(map(str, self.replicas))}\tIsr: {','.join(map(str, self.isr))}")
        if self.reassignment is not None:
            text += (f"\tAdding Replicas: {','.join(map(str, self.reassignment['adding_replicas']))}"
                     f"\tRemoving Replicas: {','.join(map(str, self.reassignment['removing_replicas']))}")
        return text + "\tElr: N/A\tLastKnownElr: N/A"


def execute(argv: list[str] | None) -> None:
    args = parser().parse(argv)
    action = check_args(args)
    with Admin(client_settings(args.bootstrap_server, args.command_config, client_id="topics-tool")) as admin:
        getattr(TopicService(admin), "list_topics" if action == "list" else action)(args)


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv), error_prefix="Error while executing topic command : ")


if __name__ == "__main__":
    sys.exit(main())
