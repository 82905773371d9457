"""``twisted-kafka-leader-election``: Kafka's ``kafka-leader-election.sh`` (``LeaderElectionCommand``).

    twisted-kafka-leader-election --bootstrap-server HOST:PORT --election-type preferred|unclean
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file FILE)
        [--admin.config FILE | --command-config FILE]

ElectLeaders (43) for the partitions named: a preferred election moves
leadership back to the first replica when it is in sync, an unclean one
gives a leaderless partition a leader from outside the ISR.  Kafka's lines:
``Successfully completed leader election (PREFERRED) for partitions t-0``,
``Valid replica already elected for partitions t-1``, and for each failure
``Error completing leader election (PREFERRED) for partition: t-2: <error>``
(then exit 1).  The JSON file is Kafka's ``{"partitions": [{"topic": "t",
"partition": 0}, ...]}``.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

from .admin import Admin
from .client_config import client_settings
from .command import KafkaArgumentParser, ToolError, UsageError, run_tool
from .output import topic_partition

PROG = "twisted-kafka-leader-election"


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool attempts to elect a new leader for a set of topic partitions. The type "
                                  "of elections supported are preferred replicas and unclean replicas.")
    p.add_argument("--bootstrap-server", help="A hostname and port for the broker to connect to, in the form "
                                              "host:port. REQUIRED.")
    p.add_argument("--admin.config", dest="admin_config", help="Configuration properties files to pass to the "
                                                               "admin client")
    p.add_argument("--command-config", help="The same as --admin.config (the name the other tools use).")
    p.add_argument("--path-to-json-file", help="The JSON file with the list of partitions for which leader elections "
                                               "should be performed.")
    p.add_argument("--topic", help="Name of topic for which to perform an election.")
    p.add_argument("--partition", type=int, help="Partition id for which to perform an election. REQUIRED if "
                                                 "--topic is specified.")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="Perform election on all of the eligible topic partitions.")
    p.add_argument("--election-type", help="Type of election to attempt: preferred or unclean. REQUIRED.")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


def check_args(args) -> ElectionType:
    """Kafka's ``LeaderElectionCommandOptions.validate``."""
    missing = [name for name, value in (("bootstrap-server", args.bootstrap_server),
                                        ("election-type", args.election_type)) if not value]
    if missing:
        raise UsageError(f"Missing required option(s): {', '.join(missing)}")
    try:
        election = ElectionType[args.election_type.strip().upper()]
    except KeyError:
        raise UsageError(f"Value for argument [election-type] has invalid value: {args.election_type} "
                         "(preferred or unclean)") from None
    chosen = [x for x in (args.topic, args.all_topic_partitions, args.path_to_json_file) if x]
    if len(chosen) != 1:
        raise UsageError("One and only one of the following options is required: topic, all-topic-partitions, "
                         "path-to-json-file")
    if args.topic and args.partition is None:
        raise UsageError("Missing required option(s): partition")
    if args.partition is not None and not args.topic:
        raise UsageError("Option partition is only allowed if topic is used")
    if args.admin_config and args.command_config:
        raise UsageError("Give one of --admin.config and --command-config")
    return election


def partitions_from_file(path: str) -> list[tuple[str, int]]:
    """Kafka's ``parseReplicaElectionData``."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise ToolError(f"{path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ToolError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise ToolError('Replica election data is missing "partitions" field')
    try:
        partitions = [(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (KeyError, TypeError, ValueError):
        raise ToolError(f'{path}: each of "partitions" needs a "topic" and a "partition"') from None
    duplicates = sorted({topic_partition(*p) for p in partitions if partitions.count(p) > 1})
    if duplicates:
        raise ToolError(f"Replica election data contains duplicate partitions: {','.join(duplicates)}")
    return partitions


def execute(argv: list[str] | None) -> None:
    args = parser().parse(argv)
    election = check_args(args)
    if args.path_to_json_file:
        requested: list[tuple[str, int]] | None = partitions_from_file(args.path_to_json_file)
    elif args.topic:
        requested = [(args.topic, args.partition)]
    else:
        requested = None
    settings = client_settings(args.bootstrap_server, args.admin_config or args.command_config,
                               client_id="leader-election-tool", source="--admin.config")
    with Admin(settings) as admin:
        partitions = None if requested is None else [TopicPartition(t, p) for t, p in requested]
        # confluent-kafka 2.16's elect_leaders refuses request_timeout (a format error in its binding);
        # the wait is bounded by Admin.wait all the same.
        results = admin.wait(admin.client.elect_leaders(election, partitions), "the election results")
    succeeded, noop, failed = [], [], []
    for tp, outcome in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
        name = topic_partition(tp.topic, tp.partition)
        error = outcome.args[0] if isinstance(outcome, KafkaException) else outcome
        if error is None:
            succeeded.append(name)
        elif error.code() == KafkaError.ELECTION_NOT_NEEDED:
            noop.append(name)
        else:
            failed.append((name, error))
    if succeeded:
        print(f"Successfully completed leader election ({election.name}) for partitions {', '.join(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for name, error in failed:
        print(f"Error completing leader election ({election.name}) for partition: {name}: "
              f"{' '.join(error.str().split())} ({error.name()})")
    if failed:
        raise ToolError(f"{len(failed)} replica(s) could not be elected")


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv))


if __name__ == "__main__":
    sys.exit(main())
