"""``twisted-kafka-consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``).

    twisted-kafka-consumer-groups --bootstrap-server HOST:PORT --list [--state [S,...]] [--type [T,...]]
    twisted-kafka-consumer-groups --bootstrap-server HOST:PORT --describe (--group G ... | --all-groups)
        [--offsets | --members [--verbose] | --state]
    twisted-kafka-consumer-groups --bootstrap-server HOST:PORT --reset-offsets (--group G | --all-groups)
        (--all-topics | --topic T[:P,P] ...) (--to-earliest | --to-latest | --to-current | --to-offset N |
        --shift-by N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS | --from-file CSV)
        [--dry-run | --execute] [--export]
    twisted-kafka-consumer-groups --bootstrap-server HOST:PORT --delete (--group G ... | --all-groups)
    twisted-kafka-consumer-groups --bootstrap-server HOST:PORT --delete-offsets --group G --topic T[:P,P] ...

``--describe`` prints Kafka's table ``GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``: the committed offset
(OffsetFetch), the partition's log end offset (ListOffsets, latest) and
their difference.  Offsets are reset only for a group without members
(Empty or Dead), as in Kafka; without ``--execute`` a reset is a dry run.
"""

from __future__ import annotations

import datetime
import re
import sys
from collections.abc import Iterable
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType, TopicCollection
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import OffsetSpec

from .admin import Admin
from .client_config import client_settings
from .command import KafkaArgumentParser, ToolError, UsageError, refuse_with, require, run_tool
from .output import MISSING

PROG = "twisted-kafka-consumer-groups"
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
SCENARIOS = ("to_offset", "shift_by", "to_datetime", "by_duration", "to_earliest", "to_latest", "to_current",
             "from_file")

#: Kafka's ConsumerGroupState.toString, by librdkafka's state.
STATE_NAMES = {ConsumerGroupState.UNKNOWN: "Unknown", ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
               ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
               ConsumerGroupState.STABLE: "Stable", ConsumerGroupState.DEAD: "Dead",
               ConsumerGroupState.EMPTY: "Empty"}
STATES_BY_NAME = {name.lower(): state for state, name in STATE_NAMES.items() if state != ConsumerGroupState.UNKNOWN}
TYPE_NAMES = {ConsumerGroupType.UNKNOWN: "Unknown", ConsumerGroupType.CONSUMER: "Consumer",
              ConsumerGroupType.CLASSIC: "Classic"}
TYPES_BY_NAME = {name.lower(): kind for kind, name in TYPE_NAMES.items() if kind != ConsumerGroupType.UNKNOWN}


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to list all consumer groups, describe a consumer group, delete "
                                  "consumer group info, or reset consumer group offsets.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client "
                                            "and Consumer.")
    p.add_argument("--group", action="append", help="The consumer group we wish to act on.")
    p.add_argument("--topic", action="append",
                   help="The topic whose consumer group information should be deleted or topic whose should be "
                        "included in the reset offset process (topic1:0,1,2 names partitions).")
    p.add_argument("--all-topics", action="store_true",
                   help="Consider all topics assigned to a group in the `reset-offsets` process.")
    p.add_argument("--list", action="store_true", help="List all consumer groups.")
    p.add_argument("--describe", action="store_true",
                   help="Describe consumer group and list offset lag (number of messages not yet processed).")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--delete", action="store_true", help="Pass in groups to delete topic partition offsets and "
                                                          "ownership information over the entire consumer group.")
    p.add_argument("--timeout", type=int, metavar="ms",
                   help="The time to wait for each answer, in milliseconds (default: default.api.timeout.ms of "
                        "--command-config, else 60000).")
    p.add_argument("--reset-offsets", action="store_true",
                   help="Reset offsets of consumer group; its members must be stopped.")
    p.add_argument("--delete-offsets", action="store_true",
                   help="Delete offsets of consumer group. Supports one consumer group at the time, and "
                        "multiple topics.")
    p.add_argument("--dry-run", action="store_true", help="Only show results without executing changes.")
    p.add_argument("--execute", action="store_true", help="Execute operation (reset-offsets).")
    p.add_argument("--export", action="store_true", help="Export operation execution to a CSV format.")
    p.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset.")
    p.add_argument("--from-file", help="Reset offsets to values defined in CSV file.")
    p.add_argument("--to-datetime", help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'")
    p.add_argument("--by-duration", help="Reset offsets to offset by duration from current timestamp. "
                                         "Format: 'PnDTnHnMnS'")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument("--shift-by", type=int, help="Reset offsets shifting current offset by 'n', where 'n' can be "
                                                "positive or negative.")
    p.add_argument("--members", action="store_true", help="Describe members of the group.")
    p.add_argument("--verbose", action="store_true", help="Provide additional information, if any, when "
                                                          "describing the group.")
    p.add_argument("--offsets", action="store_true", help="Describe the group and list all topic partitions in "
                                                          "the group along with their offset lag (the default).")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="With --describe, the state of the group; with --list, the states of all groups, or "
                        "only those in the given states (e.g. stable,empty).")
    p.add_argument("--type", nargs="?", const="", default=None,
                   help="With --list, the types of the groups, or only those of the given types "
                        "(classic,consumer).")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


def check_args(args) -> str:
    """Kafka's ``ConsumerGroupCommandOptions.checkArgs``; the chosen action."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                         "--delete-offsets")
    action = chosen[0]
    require(args, "bootstrap-server")
    scope = "--group, --all-groups"
    if action == "describe":
        if not args.group and not args.all_groups:
            raise UsageError(f"Option [describe] takes one of these options: {scope}")
        if sum(bool(x) for x in (args.members, args.offsets, args.state is not None)) > 1:
            raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if args.state:
            raise UsageError("Option [describe] does not take a value for [state]")
    if action != "describe":
        for name in ("members", "verbose", "offsets"):
            if getattr(args, name):
                raise UsageError(f"Option [{name}] can only be used with [describe]")
    if args.state is not None and action not in ("describe", "list"):
        raise UsageError("Option [state] can only be used with [describe] or [list]")
    if args.type is not None and action != "list":
        raise UsageError("Option [type] can only be used with [list]")
    if action == "delete":
        if not args.group and not args.all_groups:
            raise UsageError(f"Option [delete] takes one of these options: {scope}")
        if args.topic:
            raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if action == "delete_offsets" and (not args.group or not args.topic):
        raise UsageError("Option [delete-offsets] takes the following options: --group, --topic")
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not args.group and not args.all_groups:
            raise UsageError(f"Option [reset-offsets] takes one of these options: {scope}")
        scenarios = [s for s in SCENARIOS if getattr(args, s) not in (None, False)]
        if len(scenarios) > 1:
            raise UsageError(f'Option "[{scenarios[0].replace("_", "-")}]" can\'t be used with option '
                             f'"[{scenarios[1].replace("_", "-")}]"')
        if not scenarios:
            raise UsageError("Option [reset-offsets] requires one of the following scenarios: "
                             + ", ".join(f"[{s.replace('_', '-')}]" for s in SCENARIOS))
        if not args.all_topics and not args.topic and not args.from_file:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if not args.dry_run and not args.execute:
            print("WARN: No action will be performed as the --execute option is missing. In a future major release, "
                  "the default behavior of this command will be to prompt the user before executing the reset "
                  "rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting "
                  "this command and want to keep the current default behavior without prompting.", file=sys.stderr)
    refuse_with(args, "group", ["all-groups"])
    if args.group and action == "list":
        raise UsageError('Option "[group]" can\'t be used with option "[list]"')
    if args.topic and action in ("list", "describe"):
        raise UsageError(f'Option "[topic]" can\'t be used with option "[{action}]"')
    if args.export and action != "reset_offsets":
        raise UsageError("Option [export] can only be used with [reset-offsets]")
    return action


def parse_datetime(text: str) -> int:
    """Kafka's ``Utils.getDateTime``: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``, ``+hh:mm``);
    without one, UTC.  Epoch milliseconds."""
    if "T" not in text:
        raise UsageError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    date, _, clock = text.partition("T")
    zone_given = any(c in clock for c in "+-Z")
    try:
        moment = datetime.datetime.fromisoformat(text if zone_given else text + "+00:00")
    except ValueError:
        raise UsageError(f"Error parsing timestamp {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d+)?)S)?)?$",
                       re.IGNORECASE)


def parse_duration(text: str) -> datetime.timedelta:
    """Java's ``Duration.parse`` for the ``PnDTnHnMnS`` form."""
    match = _DURATION.match(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise UsageError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, hours, minutes, seconds = match.groups()
    duration = datetime.timedelta(days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0),
                                  seconds=float(seconds or 0))
    return -duration if sign == "-" else duration


def parse_topic_partitions(arg: str) -> list[tuple[str, int]]:
    """``topic:0,1,2`` -> its partitions (Kafka's ``parseTopicsWithPartitions``)."""
    parts = arg.split(":")
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    topic, partitions = parts
    result = []
    for partition in partitions.split(","):
        try:
            result.append((topic, int(partition)))
        except ValueError:
            raise UsageError(f"Invalid partition '{partition}' specified in topic arg '{arg}''") from None
    return result


class ConsumerGroupService:
    def __init__(self, admin: Admin, args) -> None:
        self.admin = admin
        self.args = args
        self.failed = False

    def error(self, message: str) -> None:
        """Kafka's ``printError``: the line is ``Error: <message>``; here on standard error, and the exit is 1."""
        print(f"Error: {message}", file=sys.stderr)
        self.failed = True

    # -- lookups ---------------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        return self.list_group_ids() if self.args.all_groups else list(self.args.group)

    def listings(self, states: set | None = None, types: set | None = None) -> list:
        kwargs: dict = dict(self.admin.request_kwargs())
        if states:
            kwargs["states"] = states
        if types:
            kwargs["types"] = types
        result = self.admin.wait(self.admin.client.list_consumer_groups(**kwargs), "the list of groups")
        for error in result.errors:
            self.error(f"Listing some consumer groups failed: {error}")
        return sorted(result.valid, key=lambda listing: listing.group_id)

    def list_group_ids(self) -> list[str]:
        return [listing.group_id for listing in self.listings()]

    def describe_groups(self, group_ids: Iterable[str]) -> dict:
        futures = self.admin.client.describe_consumer_groups(list(group_ids), **self.admin.request_kwargs())
        return {group: self.admin.wait(future, f"the description of group {group}")
                for group, future in futures.items()}

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group)]
        futures = self.admin.client.list_consumer_group_offsets(request, **self.admin.request_kwargs())
        answer = self.admin.wait(futures[group], f"the committed offsets of group {group}")
        return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions
                if tp.error is None and tp.offset >= 0}

    def log_offsets(self, partitions: Iterable[tuple[str, int]], spec) -> dict[tuple[str, int], int | None]:
        """Each partition's offset for ``spec`` (ListOffsets); None where the broker gave none."""
        requested = {TP(topic, partition): spec for topic, partition in partitions}
        if not requested:
            return {}
        futures = self.admin.client.list_offsets(requested, **self.admin.request_kwargs())
        result: dict[tuple[str, int], int | None] = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = self.admin.wait(future, f"the offsets of {tp.topic}-{tp.partition}"
                                                                   ).offset
            except ToolError:
                result[(tp.topic, tp.partition)] = None
        return result

    def topic_partitions(self, topics: list[str]) -> list[tuple[str, int]]:
        futures = self.admin.client.describe_topics(TopicCollection(topics), **self.admin.request_kwargs())
        found = []
        for topic, future in futures.items():
            description = self.admin.wait(future, f"the description of topic {topic}")
            found += [(topic, p.id) for p in description.partitions]
        return found

    # -- list ------------------------------------------------------------------------------------

    def list_groups(self) -> None:
        include_type = self.args.type is not None
        include_state = self.args.state is not None
        if not (include_type or include_state):
            for group in self.list_group_ids():
                print(group)
            return
        states = self.parse_names(self.args.state, STATES_BY_NAME, "state", STATE_NAMES)
        types = self.parse_names(self.args.type, TYPES_BY_NAME, "types", TYPE_NAMES)
        listings = self.listings(states, types)
        width = max([15] + [len(listing.group_id) for listing in listings]) + 10
        fmt = f"%-{width}s"
        header = ["GROUP"]
        if include_type:
            fmt += " %-20s"
            header.append("TYPE")
        if include_state:
            fmt += " %-20s"
            header.append("STATE")
        print(fmt % tuple(header))
        for listing in listings:
            row = [listing.group_id]
            if include_type:
                row.append(TYPE_NAMES.get(listing.type, "Unknown"))
            if include_state:
                row.append(STATE_NAMES.get(listing.state, "Unknown"))
            print(fmt % tuple(row))

    @staticmethod
    def parse_names(text: str | None, known: dict, what: str, names: dict) -> set:
        if not text:
            return set()
        chosen = set()
        for name in text.split(","):
            value = known.get(name.strip().lower())
            if value is None:
                valid = ", ".join(v for k, v in names.items() if k.name != "UNKNOWN")
                raise UsageError(f"Invalid {what} list '{text}'. Valid {what}s are: {valid}")
            chosen.add(value)
        return chosen

    # -- describe --------------------------------------------------------------------------------

    def describe(self) -> None:
        groups = self.describe_groups(self.group_ids())
        for group_id in sorted(groups):
            description = groups[group_id]
            if self.args.members:
                self.print_members(group_id, description)
            elif self.args.state is not None:
                self.print_state(group_id, description)
            else:
                self.print_offsets(group_id, description)

    def should_print(self, group: str, state, rows: int) -> bool:
        """Kafka's ``shouldPrintMemberState``."""
        if state == ConsumerGroupState.DEAD:
            self.error(f"Consumer group '{group}' does not exist.")
            return False
        if state == ConsumerGroupState.EMPTY:
            print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
        elif state in (ConsumerGroupState.PREPARING_REBALANCING, ConsumerGroupState.COMPLETING_REBALANCING):
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
        return rows > 0

    def offset_rows(self, group: str, description) -> list[tuple]:
        """Kafka's ``collectGroupOffsets``: a row per assigned partition, then per committed unassigned one."""
        committed = self.committed(group)
        assigned: list[tuple[tuple[str, int], Any]] = []
        members = sorted((m for m in description.members if m.assignment.topic_partitions),
                         key=lambda m: -len(m.assignment.topic_partitions))
        for member in members:
            for tp in sorted(member.assignment.topic_partitions, key=lambda tp: (tp.topic, tp.partition)):
                assigned.append(((tp.topic, tp.partition), member))
        unassigned = sorted(set(committed) - {key for key, _ in assigned})
        log_end = self.log_offsets([key for key, _ in assigned] + unassigned, OffsetSpec.latest())
        rows = []
        for key, member in [*assigned, *((key, None) for key in unassigned)]:
            offset = committed.get(key)
            end = log_end.get(key)
            lag = end - offset if offset is not None and end is not None else None
            rows.append((group, key[0], str(key[1]), _text(offset), _text(end), _text(lag),
                         member.member_id if member else MISSING, member.host if member else MISSING,
                         member.client_id if member else MISSING))
        return rows

    def print_offsets(self, group: str, description) -> None:
        rows = self.offset_rows(group, description) if description.state != ConsumerGroupState.DEAD else []
        if not self.should_print(group, description.state, len(rows)):
            return
        widths = [max([15] + [len(row[i]) for row in rows]) for i in (0, 1, 6, 7)]
        fmt = f"%-{widths[0]}s %-{widths[1]}s %-10s %-15s %-15s %-15s %-{widths[2]}s %-{widths[3]}s %s"
        print()
        print(fmt % ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                     "HOST", "CLIENT-ID"))
        for row in rows:
            print(fmt % row)
        print()

    def print_members(self, group: str, description) -> None:
        members = description.members
        if not self.should_print(group, description.state, len(members)) and \
                description.state == ConsumerGroupState.DEAD:
            return
        verbose = self.args.verbose
        widths = {"group": max([15, len(group)]),
                  "id": max([15] + [len(m.member_id) for m in members]),
                  "instance": max([17] + [len(m.group_instance_id or "") for m in members]),
                  "host": max([15] + [len(m.host) for m in members]),
                  "client": max([15] + [len(m.client_id) for m in members])}
        with_instance = any(m.group_instance_id for m in members)
        if with_instance:
            fmt = (f"%-{widths['group']}s %-{widths['id']}s %-{widths['instance']}s %-{widths['host']}s "
                   f"%-{widths['client']}s %-15s ")
            header: tuple = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        else:
            fmt = f"%-{widths['group']}s %-{widths['id']}s %-{widths['host']}s %-{widths['client']}s %-15s "
            header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        print("\n" + fmt % header + ("ASSIGNMENT" if verbose else ""))
        for member in members:
            partitions = member.assignment.topic_partitions
            values: tuple = (group, member.member_id, *((member.group_instance_id or "",) if with_instance else ()),
                             member.host, member.client_id, len(partitions))
            line = fmt % values
            if verbose:
                by_topic: dict[str, list[int]] = {}
                for tp in partitions:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                line += (", ".join(sorted("(" + ",".join(sorted(str(p) for p in ps)) + ")"
                                          for ps in by_topic.values())) if by_topic else MISSING)
            print(line)

    def print_state(self, group: str, description) -> None:
        if not self.should_print(group, description.state, 1):
            return
        node = description.coordinator
        coordinator = f"{node.host}:{node.port}  ({node.id})"
        width = max(25, len(coordinator))
        fmt = f"%-{width}s %-25s %-20s %-15s %s"
        print()
        print(fmt % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
        print(fmt % (group, coordinator, description.partition_assignor, STATE_NAMES.get(description.state),
                     len(description.members)))
        print()

    # -- delete ----------------------------------------------------------------------------------

    def delete(self) -> None:
        groups = self.group_ids()
        futures = self.admin.client.delete_consumer_groups(groups, **self.admin.request_kwargs())
        succeeded, failed = [], {}
        for group, future in futures.items():
            try:
                self.admin.wait(future, f"the deletion of group {group}")
                succeeded.append(group)
            except ToolError as exc:
                failed[group] = str(exc)
        if not failed:
            print(f"Deletion of requested consumer groups ('{', '.join(succeeded)}') was successful.")
            return
        self.error("Deletion of some consumer groups failed:")
        for group, error in failed.items():
            print(f"* Group '{group}' could not be deleted due to: {error}")
        if succeeded:
            print("\nThese consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in succeeded))

    # -- delete offsets (OffsetDelete, kafka-python) -----------------------------------------------

    def delete_offsets(self) -> None:
        from kafka import TopicPartition as PyTP
        from kafka.errors import KafkaError as PyKafkaError

        group = self.args.group[0]
        explicit: list[str] = []
        whole: list[str] = []
        for arg in self.args.topic:
            (explicit if ":" in arg else whole).append(arg)
        partitions = [tp for arg in explicit for tp in parse_topic_partitions(arg)]
        results: dict[tuple[str, int], str | None] = {}
        for topic in whole:
            try:
                partitions += self.topic_partitions([topic])
            except ToolError as exc:
                results[(topic, -1)] = str(exc)
        admin = self.admin.kafka_python()
        top = None
        try:
            answer = self.admin.call("OffsetDelete", 47, admin.delete_group_offsets, group,
                                     [PyTP(t, p) for t, p in partitions])
        except ToolError as exc:
            top, answer = str(exc), {}
        for tp, error in answer.items():
            failed = error is not None and error is not PyKafkaError and getattr(error, "errno", 0) != 0
            results[(tp.topic, tp.partition)] = (f"{error.message}: {error.description}" if failed else None)
        partition_errors = any(results.values())
        if top is None and not partition_errors:
            print(f"Request succeed for deleting offsets with topic {', '.join(self.args.topic)} group {group}")
        elif top is not None:
            self.error(top)
        else:
            self.error("Encounter some partition level error, see the follow-up details:")
        fmt = "%-30s %-15s %-15s"
        print()
        print(fmt % ("TOPIC", "PARTITION", "STATUS"), end="")
        for (topic, partition), error in sorted(results.items()):
            print("\n" + fmt % (topic, partition if partition >= 0 else "Not Provided",
                                f"Error: :{error}" if error else "Successful"), end="")
        print()

    # -- reset offsets ---------------------------------------------------------------------------

    def reset_offsets(self) -> None:
        groups = self.describe_groups(self.group_ids())
        plans: dict[str, dict[tuple[str, int], int]] = {}
        dry_run = self.args.dry_run or not self.args.execute
        for group_id, description in groups.items():
            if description.state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
                self.error(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                           f"state is {STATE_NAMES.get(description.state)}.")
                plans[group_id] = {}
                continue
            plan = self.prepare(group_id, self.partitions_to_reset(group_id))
            if not dry_run and plan:
                request = [ConsumerGroupTopicPartitions(group_id, [TP(t, p, o) for (t, p), o in sorted(plan.items())])]
                futures = self.admin.client.alter_consumer_group_offsets(request, **self.admin.request_kwargs())
                answer = self.admin.wait(futures[group_id], f"the new offsets of group {group_id}")
                errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in answer.topic_partitions if tp.error]
                if errors:
                    raise ToolError(f"Resetting the offsets of group {group_id} failed: {'; '.join(errors)}")
            plans[group_id] = plan
        if self.args.export:
            single = len(self.args.group or []) == 1
            lines = [(f"{t},{p},{o}" if single else f"{g},{t},{p},{o}")
                     for g, plan in plans.items() for (t, p), o in sorted(plan.items())]
            print("".join(line + "\n" for line in lines))
            return
        fmt = "%-30s %-30s %-10s %-15s"
        if plans:
            print("\n" + fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), end="")
        for group_id, plan in plans.items():
            for (topic, partition), offset in sorted(plan.items()):
                print("\n" + fmt % (group_id, topic, partition, offset), end="")
        print()

    def partitions_to_reset(self, group: str) -> list[tuple[str, int]]:
        if self.args.all_topics:
            return sorted(self.committed(group))
        if self.args.topic:
            explicit = [tp for arg in self.args.topic if ":" in arg for tp in parse_topic_partitions(arg)]
            topics = [arg for arg in self.args.topic if ":" not in arg]
            return explicit + (self.topic_partitions(topics) if topics else [])
        return []

    def prepare(self, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Kafka's ``prepareOffsetsToReset``: the new offset of each partition for the chosen scenario."""
        args = self.args
        if args.to_offset is not None:
            return self.check_range({tp: args.to_offset for tp in partitions})
        if args.to_earliest:
            return self.require_offsets(self.log_offsets(partitions, OffsetSpec.earliest()), "starting")
        if args.to_latest:
            return self.require_offsets(self.log_offsets(partitions, OffsetSpec.latest()), "ending")
        if args.shift_by is not None:
            current = self.committed(group)
            missing = [tp for tp in partitions if tp not in current]
            if missing:
                raise UsageError(f"Cannot shift offset for partition {missing[0][0]}-{missing[0][1]} since there "
                                 "is no current committed offset")
            return self.check_range({tp: current[tp] + args.shift_by for tp in partitions})
        if args.to_datetime is not None or args.by_duration is not None:
            if args.to_datetime is not None:
                timestamp = parse_datetime(args.to_datetime)
            else:
                now = datetime.datetime.now(datetime.UTC)
                timestamp = int((now - parse_duration(args.by_duration)).timestamp() * 1000)
            return self.offsets_for_time(partitions, timestamp)
        if args.from_file is not None:
            plan = self.reset_plan(group)
            return self.check_range(plan) if plan else {}
        # --to-current
        current = self.committed(group)
        without = [tp for tp in partitions if tp not in current]
        plan = {tp: current[tp] for tp in partitions if tp in current}
        plan.update(self.require_offsets(self.log_offsets(without, OffsetSpec.latest()), "ending"))
        return plan

    def require_offsets(self, offsets: dict[tuple[str, int], int | None], which: str) -> dict[tuple[str, int], int]:
        for (topic, partition), offset in offsets.items():
            if offset is None or offset < 0:
                raise ToolError(f"Error getting {which} offset of topic partition: {topic}-{partition}")
        return {tp: offset for tp, offset in offsets.items() if offset is not None}

    def offsets_for_time(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        found = self.log_offsets(partitions, OffsetSpec.for_timestamp(timestamp))
        result = {}
        empty = []
        for tp, offset in found.items():
            if offset is None:
                raise ToolError(f"Error getting offset by timestamp of topic partition: {tp[0]}-{tp[1]}")
            if offset < 0:
                empty.append(tp)
                print(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest known offset.")
            else:
                result[tp] = offset
        result.update(self.require_offsets(self.log_offsets(empty, OffsetSpec.latest()), "ending"))
        return result

    def check_range(self, requested: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Kafka's ``checkOffsetsRange``: an offset past the log end or before its start is moved to it."""
        starts = self.log_offsets(requested, OffsetSpec.earliest())
        ends = self.log_offsets(requested, OffsetSpec.latest())
        result = {}
        for tp, offset in requested.items():
            end, start = ends.get(tp), starts.get(tp)
            name = f"{tp[0]}-{tp[1]}"
            if end is None and start is None:
                raise ToolError(f"Unexpected non-existing offset value for topic partition {name}")
            if end is not None and offset > end:
                print(f"WARN: New offset ({offset}) is higher than latest offset for topic partition {name}. "
                      f"Value will be set to {end}", file=sys.stderr)
                offset = end
            elif start is not None and offset < start:
                print(f"WARN: New offset ({offset}) is lower than earliest offset for topic partition {name}. "
                      f"Value will be set to {start}", file=sys.stderr)
                offset = start
            result[tp] = offset
        return result

    def reset_plan(self, group: str) -> dict[tuple[str, int], int]:
        """``--from-file``: Kafka's CSV, ``topic,partition,offset`` or ``group,topic,partition,offset``."""
        try:
            with open(self.args.from_file, encoding="utf-8") as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError as exc:
            raise ToolError(f"{self.args.from_file}: {exc.strerror}") from None
        plan: dict[tuple[str, int], int] = {}
        for line in lines:
            fields = line.split(",")
            try:
                if len(fields) == 3:
                    row_group, (topic, partition, offset) = group, fields
                elif len(fields) == 4:
                    row_group, topic, partition, offset = fields
                else:
                    raise ValueError
                if row_group == group:
                    plan[(topic, int(partition))] = int(offset)
            except ValueError:
                raise ToolError(f"{self.args.from_file}: cannot read the line {line!r} "
                                "(expected topic,partition,offset or group,topic,partition,offset)") from None
        if not plan:
            self.error(f"No reset plan for group {group} found")
        return plan


def _text(value: int | None) -> str:
    return MISSING if value is None else str(value)


def execute(argv: list[str] | None) -> int:
    args = parser().parse(argv)
    action = check_args(args)
    settings = client_settings(args.bootstrap_server, args.command_config, client_id="consumer-groups-tool")
    if args.timeout is not None:
        settings.timeout_ms = args.timeout
    with Admin(settings) as admin:
        service = ConsumerGroupService(admin, args)
        getattr(service, "list_groups" if action == "list" else action)()
    return 1 if service.failed else 0


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv), error_prefix="Error: Executing consumer group command failed due to ")


if __name__ == "__main__":
    sys.exit(main())
