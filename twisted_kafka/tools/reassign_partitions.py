"""``twisted-kafka-reassign-partitions``: Kafka's ``kafka-reassign-partitions.sh`` (``ReassignPartitionsCommand``).

    twisted-kafka-reassign-partitions --bootstrap-server HOST:PORT --generate
        --topics-to-move-json-file topics.json --broker-list 1,2,3 [--disable-rack-aware]
    twisted-kafka-reassign-partitions --bootstrap-server HOST:PORT --execute --reassignment-json-file plan.json
        [--additional] [--throttle B/s] [--replica-alter-log-dirs-throttle B/s] [--timeout ms]
    twisted-kafka-reassign-partitions --bootstrap-server HOST:PORT --verify --reassignment-json-file plan.json
        [--preserve-throttles]
    twisted-kafka-reassign-partitions --bootstrap-server HOST:PORT --cancel --reassignment-json-file plan.json
    twisted-kafka-reassign-partitions --bootstrap-server HOST:PORT --list

The files are Kafka's JSON (``{"version":1,"topics":[{"topic":"t"}]}`` and
``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],
"log_dirs":["any","any"]}]}``); ``--generate`` prints the current
assignment and a proposal made with Kafka's replica assignment rule
(rack-unaware, as ``--disable-rack-aware``).  Reassignments travel as
AlterPartitionReassignments (45) and ListPartitionReassignments (46),
through kafka-python (librdkafka has neither).
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from twisted_kafka.controller.interface import assign_replicas
from twisted_kafka.protocol.errors import KafkaError as BrokerError

from .admin import Admin
from .client_config import client_settings
from .command import KafkaArgumentParser, ToolError, UsageError, run_tool
from .output import compact_json, topic_partition

PROG = "twisted-kafka-reassign-partitions"
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
ANY_LOG_DIR = "any"
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                    "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
#: Which flags each action takes besides its required ones (Kafka's ``permittedArgs``).
PERMITTED = {
    "verify": {"bootstrap_server", "command_config", "preserve_throttles", "reassignment_json_file"},
    "generate": {"bootstrap_server", "command_config", "disable_rack_aware", "topics_to_move_json_file", "broker_list"},
    "execute": {"bootstrap_server", "command_config", "additional", "throttle", "replica_alter_log_dirs_throttle",
                "timeout", "reassignment_json_file"},
    "cancel": {"bootstrap_server", "command_config", "preserve_throttles", "timeout", "reassignment_json_file"},
    "list": {"bootstrap_server", "command_config"},
}
REQUIRED = {"verify": ("reassignment_json_file",), "generate": ("topics_to_move_json_file", "broker_list"),
            "execute": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}
CANNOT_EXECUTE = ("Cannot execute because there is an existing partition assignment.  Use --additional to override "
                  "this and create a new partition assignment in addition to the existing one. The --additional flag "
                  "can also be used to change the throttle by resubmitting the current reassignment.")

Partition = tuple[str, int]


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to move topic partitions between replicas.")
    p.add_argument("--bootstrap-server", help="the server(s) to use for bootstrapping. REQUIRED.")
    p.add_argument("--bootstrap-controller", help="Not supported here: use --bootstrap-server.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--generate", action="store_true", help="Generate a candidate partition reassignment "
                                                           "configuration. Note that this only generates a "
                                                           "candidate assignment, it does not execute it.")
    p.add_argument("--execute", action="store_true", help="Kick off the reassignment as specified by the "
                                                          "--reassignment-json-file option.")
    p.add_argument("--verify", action="store_true", help="Verify if the reassignment completed as specified by "
                                                         "the --reassignment-json-file option.")
    p.add_argument("--cancel", action="store_true", help="Cancel an active reassignment.")
    p.add_argument("--list", action="store_true", help="List all active partition reassignments.")
    p.add_argument("--reassignment-json-file", help="The JSON file with the partition reassignment configuration.")
    p.add_argument("--topics-to-move-json-file", help="Generate a reassignment configuration to move the "
                                                      "partitions of the specified topics to the list of brokers "
                                                      "specified by the --broker-list option.")
    p.add_argument("--broker-list", help="The list of brokers to which the partitions need to be reassigned in the "
                                         "form \"0,1,2\".")
    p.add_argument("--disable-rack-aware", action="store_true", help="Disable rack aware replica assignment "
                                                                     "(the only kind made here).")
    p.add_argument("--throttle", type=int, default=-1, help="The movement of partitions between brokers will be "
                                                            "throttled to this value (bytes/sec).")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1,
                   help="The movement of replicas between log directories on the same broker will be throttled to "
                        "this value (bytes/sec).")
    p.add_argument("--timeout", type=int, default=10000, help="The maximum time in ms to wait for log directory "
                                                              "replica assignment to begin.")
    p.add_argument("--additional", action="store_true", help="Execute this reassignment in addition to any other "
                                                             "ongoing ones.")
    p.add_argument("--preserve-throttles", action="store_true", help="Do not modify broker or topic throttles.")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


def check_args(args) -> str:
    """Kafka's ``validateAndParseArgs``: exactly one action, its required flags, no flag it does not take."""
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --generate, --execute, --verify, --cancel, --list")
    action = actions[0]
    if args.bootstrap_controller:
        raise UsageError("--bootstrap-controller is not supported: use --bootstrap-server")
    if not args.bootstrap_server:
        raise UsageError("Please specify either --bootstrap-server or --bootstrap-controller")
    for name in REQUIRED[action]:
        if getattr(args, name) is None:
            raise UsageError(f'Missing required argument "[{name.replace("_", "-")}]"')
    defaults = {"throttle": -1, "replica_alter_log_dirs_throttle": -1, "timeout": 10000}
    for name, value in vars(args).items():
        given = value not in (None, False) and defaults.get(name, object()) != value
        if given and name not in ACTIONS and name not in PERMITTED[action]:
            raise UsageError(f'Option "[{name.replace("_", "-")}]" can\'t be used with action "[{action}]"')
    return action


def read_json(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise ToolError(f"{path}: {exc.strerror}") from None
    except json.JSONDecodeError:
        raise ToolError("The input string is not a valid JSON") from None


def parse_topics(path: str) -> list[str]:
    data = read_json(path)
    if not isinstance(data, dict):
        raise ToolError(f"{path}: expected {{\"version\":1,\"topics\":[{{\"topic\":\"...\"}}]}}")
    if data.get("version", 1) != 1:
        raise ToolError(f"Not supported version field value {data.get('version')}")
    try:
        return [str(entry["topic"]) for entry in data.get("topics", [])]
    except (KeyError, TypeError):
        raise ToolError(f"{path}: each of \"topics\" needs a \"topic\"") from None


def parse_reassignment(path: str) -> tuple[list[tuple[Partition, list[int]]], dict[tuple[str, int, int], str]]:
    """Kafka's ``parsePartitionReassignmentData``: the target replicas of each partition, and the log
    directories asked for (replicas whose ``log_dirs`` entry is not ``any``)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise ToolError(f"{path}: expected {{\"version\":1,\"partitions\":[...]}}")
    if data.get("version", 1) != 1:
        raise ToolError(f"Not supported version field value {data.get('version')}")
    targets: list[tuple[Partition, list[int]]] = []
    log_dirs: dict[tuple[str, int, int], str] = {}
    try:
        for entry in data.get("partitions", []):
            topic, partition = str(entry["topic"]), int(entry["partition"])
            replicas = [int(r) for r in entry["replicas"]]
            dirs = [str(d) for d in entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))]
            if len(dirs) != len(replicas):
                raise ToolError(f"Size of replicas list {replicas} is different from size of log dirs list {dirs} "
                                f"for partition {topic_partition(topic, partition)}")
            targets.append(((topic, partition), replicas))
            for replica, log_dir in zip(replicas, dirs, strict=True):
                if log_dir != ANY_LOG_DIR:
                    log_dirs[(topic, partition, replica)] = log_dir
    except (KeyError, TypeError, ValueError):
        raise ToolError(f"{path}: each of \"partitions\" needs \"topic\", \"partition\" and \"replicas\"") from None
    return targets, log_dirs


def reassignment_json(assignment: dict[Partition, list[int]]) -> str:
    """Kafka's ``formatAsReassignmentJson``."""
    return compact_json({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": assignment[(t, p)],
         "log_dirs": [ANY_LOG_DIR] * len(assignment[(t, p)])} for t, p in sorted(assignment)]})


class ReassignService:
    def __init__(self, admin: Admin, args) -> None:
        self.admin = admin
        self.args = args

    # -- lookups ---------------------------------------------------------------------------------

    def brokers(self) -> list:
        return self.admin.wait(self.admin.client.describe_cluster(**self.admin.request_kwargs()),
                               "the cluster's brokers").nodes

    def assignments(self, topics: set[str]) -> dict[Partition, list[int]]:
        futures = self.admin.client.describe_topics(TopicCollection(sorted(topics)), **self.admin.request_kwargs())
        result = {}
        for topic, future in futures.items():
            try:
                description = self.admin.wait(future, f"the description of topic {topic}")
            except ToolError as exc:
                if "UNKNOWN_TOPIC_OR_PART" in str(exc):
                    raise ToolError(f"Topic {topic} not found.") from None
                raise
            for p in description.partitions:
                result[(topic, p.id)] = [node.id for node in p.replicas]
        return result

    def ongoing(self) -> dict[Partition, dict]:
        admin = self.admin.kafka_python()
        found = self.admin.call("ListPartitionReassignments", 46, admin.list_partition_reassignments)
        return {(tp.topic, tp.partition): state for tp, state in found.items()}

    def alter(self, reassignments: dict[Partition, list[int] | None]) -> dict[Partition, str]:
        from kafka import TopicPartition as PyTP

        admin = self.admin.kafka_python()
        answer = self.admin.call("AlterPartitionReassignments", 45, admin.alter_partition_reassignments,
                                 {PyTP(t, p): replicas for (t, p), replicas in reassignments.items()})
        errors = {}
        for tp, error in answer.items():
            if error is not None and getattr(error, "errno", None):
                errors[(tp.topic, tp.partition)] = f"{error.message}: {error.description}"
        return errors

    def incremental(self, changes: dict[tuple[ResourceType, str], list[ConfigEntry]], what: str) -> None:
        resources = [ConfigResource(kind, name, incremental_configs=entries)
                     for (kind, name), entries in changes.items()]
        # librdkafka sends a broker's configs to that broker: one BROKER resource a call.
        brokers = [r for r in resources if r.restype == ResourceType.BROKER]
        batches = [[r for r in resources if r.restype != ResourceType.BROKER], *([r] for r in brokers)]
        for batch in batches:
            if not batch:
                continue
            futures = self.admin.client.incremental_alter_configs(batch, **self.admin.request_kwargs())
            for future in futures.values():
                self.admin.wait(future, what)

    # -- actions ---------------------------------------------------------------------------------

    def generate(self) -> None:
        try:
            brokers = [int(b) for b in self.args.broker_list.split(",")]
        except ValueError:
            raise UsageError(f"--broker-list: {self.args.broker_list!r} is not a list of broker ids") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise ToolError(f"Broker list contains duplicate entries: {duplicates}")
        topics = parse_topics(self.args.topics_to_move_json_file)
        duplicate_topics = sorted({t for t in topics if topics.count(t) > 1})
        if duplicate_topics:
            raise ToolError(f"List of topics to reassign contains duplicate entries: {duplicate_topics}")
        current = self.assignments(set(topics))
        nodes = [node for node in self.brokers() if node.id in brokers]
        if not self.args.disable_rack_aware and {bool(node.rack) for node in nodes} == {True, False}:
            raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in command line to "
                            "make replica assignment without rack information.")
        proposed: dict[Partition, list[int]] = {}
        for topic in sorted({t for t, _ in current}):
            partitions = sorted(p for t, p in current if t == topic)
            factor = len(current[(topic, partitions[0])])
            try:
                plan = assign_replicas([node.id for node in nodes], len(partitions), factor)
            except BrokerError as exc:
                raise ToolError(str(exc)) from None
            proposed.update({(topic, p): replicas for p, replicas in plan.items()})
        print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
        print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")

    def execute(self) -> None:
        targets, log_dirs = parse_reassignment(self.args.reassignment_json_file)
        if not targets:
            raise ToolError("Partition reassignment list cannot be empty")
        if any(not replicas for _, replicas in targets):
            raise ToolError("Partition replica list cannot be empty")
        names = [tp for tp, _ in targets]
        duplicates = sorted({topic_partition(*tp) for tp in names if names.count(tp) > 1})
        if duplicates:
            raise ToolError(f"Partition reassignment contains duplicate topic partitions: {','.join(duplicates)}")
        repeated = [f"{topic_partition(*tp)} contains multiple entries for "
                    f"{','.join(sorted({str(r) for r in replicas if replicas.count(r) > 1}))}"
                    for tp, replicas in targets if len(set(replicas)) != len(replicas)]
        if repeated:
            raise ToolError(f"Partition replica lists may not contain duplicate entries: {'. '.join(repeated)}")
        proposed = dict(targets)
        ongoing = self.ongoing()
        if ongoing and not self.args.additional:
            raise ToolError(CANNOT_EXECUTE)
        known = {node.id for node in self.brokers()}
        unknown = sorted({b for replicas in proposed.values() for b in replicas} - known)
        if unknown:
            raise ToolError(f"Unknown broker id {unknown[0]}")
        current = self.assignments({t for t, _ in proposed})
        missing = sorted(set(proposed) - set(current))
        if missing:
            raise ToolError("Unable to find partition: " + ", ".join(topic_partition(*tp) for tp in missing))
        print("Current partition replica assignment\n\n"
              f"{reassignment_json({tp: current[tp] for tp in proposed})}\n\n"
              "Save this to use as the --reassignment-json-file option during rollback")
        if self.args.throttle >= 0 or self.args.replica_alter_log_dirs_throttle >= 0:
            print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                  "throttle is removed.")
            if self.args.throttle >= 0:
                self.set_throttles(proposed, current, ongoing)
            if self.args.replica_alter_log_dirs_throttle >= 0:
                rate = str(self.args.replica_alter_log_dirs_throttle)
                moving = {b for _, _, b in log_dirs}
                self.incremental({(ResourceType.BROKER, str(b)): [ConfigEntry(
                    "replica.alter.log.dirs.io.max.bytes.per.second", rate,
                    incremental_operation=AlterConfigOpType.SET)] for b in sorted(moving)}, "the log dir throttle")
                print(f"The replica-alter-dir throttle limit was set to {rate} B/s")
        errors = self.alter(dict(proposed))
        if errors:
            raise ToolError("Error reassigning partition(s): " + "; ".join(
                f"{topic_partition(*tp)}: {error}" for tp, error in sorted(errors.items())))
        print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
              + ",".join(topic_partition(*tp) for tp in sorted(proposed)))
        if log_dirs:
            self.move_log_dirs(log_dirs)

    def set_throttles(self, proposed: dict[Partition, list[int]], current: dict[Partition, list[int]],
                      ongoing: dict[Partition, dict]) -> None:
        """Kafka's ``modifyReassignmentThrottle``: leaders throttled on the sources, followers on the new
        replicas, and the rate on every broker involved."""
        moves: dict[Partition, tuple[set[int], set[int]]] = {}
        for tp, state in ongoing.items():
            sources = set(state["replicas"]) - set(state["adding_replicas"])
            moves[tp] = (sources, set(state["adding_replicas"]))
        for tp, replicas in proposed.items():
            sources = moves[tp][0] if tp in moves else set(current[tp])
            moves[tp] = (sources, set(replicas) - sources)
        changes: dict[tuple[ResourceType, str], list[ConfigEntry]] = {}
        for topic in sorted({t for t, _ in moves}):
            leaders = sorted({f"{p}:{s}" for (t, p), (sources, _) in moves.items() if t == topic for s in sources})
            followers = sorted({f"{p}:{d}" for (t, p), (sources, dests) in moves.items() if t == topic
                                for d in dests if d not in sources})
            changes[(ResourceType.TOPIC, topic)] = [
                ConfigEntry(TOPIC_THROTTLES[0], ",".join(leaders), incremental_operation=AlterConfigOpType.SET),
                ConfigEntry(TOPIC_THROTTLES[1], ",".join(followers), incremental_operation=AlterConfigOpType.SET)]
        rate = str(self.args.throttle)
        for broker in sorted({b for sources, dests in moves.values() for b in sources | dests}):
            changes[(ResourceType.BROKER, str(broker))] = [
                ConfigEntry(name, rate, incremental_operation=AlterConfigOpType.SET) for name in BROKER_THROTTLES[:2]]
        self.incremental(changes, "the reassignment throttles")
        print(f"The inter-broker throttle limit was set to {rate} B/s")

    def move_log_dirs(self, log_dirs: dict[tuple[str, int, int], str]) -> None:
        from kafka import TopicPartitionReplica

        admin = self.admin.kafka_python()
        deadline = time.monotonic() + self.args.timeout / 1000
        pending = dict(log_dirs)
        while pending:
            answer = self.admin.call("AlterReplicaLogDirs", 34, admin.alter_replica_log_dirs,
                                     {TopicPartitionReplica(t, p, b): d for (t, p, b), d in pending.items()})
            for replica, error in answer.items():
                key = (replica.topic, replica.partition, replica.broker_id)
                if error is None or not getattr(error, "errno", 0):
                    print(f"Successfully started moving log directory to {pending.pop(key)} for replica "
                          f"{replica.topic}-{replica.partition} with broker {replica.broker_id} ")
                elif error.message != "REPLICA_NOT_AVAILABLE":
                    raise ToolError(f"Failed to alter dir for {replica}: {error.message}")
            if pending and time.monotonic() >= deadline:
                raise ToolError("Timed out before log directory move(s) could be started for: "
                                + ",".join(f"{t}-{p}-{b}" for t, p, b in sorted(pending)))
            if pending:
                time.sleep(0.1)

    def verify(self) -> None:
        targets, log_dirs = parse_reassignment(self.args.reassignment_json_file)
        ongoing = self.ongoing()
        lines = ["Status of partition reassignment:"]
        unknown_topics = {t for (t, p), _ in targets if (t, p) not in ongoing}
        current = self.current_replicas(unknown_topics)
        for tp, target in sorted(targets):
            name = topic_partition(*tp)
            if tp in ongoing:
                lines.append(f"Reassignment of partition {name} is still in progress.")
            elif current.get(tp, []) == target:
                lines.append(f"Reassignment of partition {name} is completed.")
            else:
                lines.append(f"There is no active reassignment of partition {name}, but replica set is "
                             f"{','.join(map(str, current.get(tp, [])))} rather than {','.join(map(str, target))}.")
        print("\n".join(lines))
        if log_dirs:
            print("Log directory moves cannot be verified here (DescribeReplicaLogDirs); check them with "
                  "twisted-kafka-log-dirs --describe")
        if not ongoing and not self.args.preserve_throttles:
            self.clear_throttles({t for (t, _), _ in targets}, {b for _, replicas in targets for b in replicas})

    def current_replicas(self, topics: set[str]) -> dict[Partition, list[int]]:
        found: dict[Partition, list[int]] = {}
        for topic in topics:
            try:
                found.update(self.assignments({topic}))
            except ToolError as exc:
                if "not found" not in str(exc):
                    raise
        return found

    def clear_throttles(self, topics: set[str], brokers: set[int]) -> None:
        """Kafka's ``clearAllThrottles``: the throttle settings deleted from every broker and topic involved."""
        brokers = brokers | {node.id for node in self.brokers()}
        print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
              f"{','.join(map(str, sorted(brokers)))}")
        self.delete_keys({(ResourceType.BROKER, str(b)): BROKER_THROTTLES for b in sorted(brokers)})
        print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(sorted(topics))}")
        self.delete_keys({(ResourceType.TOPIC, t): TOPIC_THROTTLES for t in sorted(topics)})

    def delete_keys(self, keys: dict[tuple[ResourceType, str], tuple[str, ...]]) -> None:
        self.incremental({resource: [ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
                                     for name in names] for resource, names in keys.items()}, "the throttle removal")

    def cancel(self) -> None:
        targets, log_dirs = parse_reassignment(self.args.reassignment_json_file)
        ongoing = self.ongoing()
        active = sorted(tp for tp, _ in targets if tp in ongoing)
        if active:
            errors = self.alter({tp: None for tp in active})
            if errors:
                raise ToolError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for: "
                                + "; ".join(f"{topic_partition(*tp)}: {e}" for tp, e in sorted(errors.items())))
            print(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: "
                  + ",".join(topic_partition(*tp) for tp in active))
        else:
            print("None of the specified partition reassignments are active.")
        print("None of the specified partition moves are active.")
        if not self.args.preserve_throttles:
            self.clear_throttles({t for (t, _), _ in targets}, {b for _, replicas in targets for b in replicas})

    def list_reassignments(self) -> None:
        ongoing = self.ongoing()
        if not ongoing:
            print("No partition reassignments found.")
            return
        lines = ["Current partition reassignments:"]
        for tp in sorted(ongoing):
            state = ongoing[tp]
            line = f"{topic_partition(*tp)}: replicas: {','.join(map(str, state['replicas']))}."
            if state["adding_replicas"]:
                line += f" adding: {','.join(map(str, state['adding_replicas']))}."
            if state["removing_replicas"]:
                line += f" removing: {','.join(map(str, state['removing_replicas']))}."
            lines.append(line)
        print("\n".join(lines))


def execute(argv: list[str] | None) -> None:
    args = parser().parse(argv)
    action = check_args(args)
    settings = client_settings(args.bootstrap_server, args.command_config, client_id="reassign-partitions-tool")
    with Admin(settings) as admin:
        getattr(ReassignService(admin, args), "list_reassignments" if action == "list" else action)()


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv), error_prefix="Error: ")


if __name__ == "__main__":
    sys.exit(main())
