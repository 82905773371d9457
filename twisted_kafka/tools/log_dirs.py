"""``twisted-kafka-log-dirs``: Kafka's ``kafka-log-dirs.sh`` (``LogDirsCommand``).

    twisted-kafka-log-dirs --bootstrap-server HOST:PORT --describe [--broker-list 0,1] [--topic-list t1,t2]

DescribeLogDirs (35) to each broker; Kafka's output: two lines, then one
line of JSON, ``{"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":
"t-0","size":1024,"offsetLag":0,"isFuture":false}],"error":null,"logDir":
"/data/kafka-logs"}]}],"version":1}`` -- a log directory's error is its
Kafka error name where Kafka prints the Java exception class.
"""

from __future__ import annotations

import sys

from .admin import Admin
from .client_config import client_settings
from .command import KafkaArgumentParser, ToolError, UsageError, require, run_tool
from .output import compact_json, topic_partition

PROG = "twisted-kafka-log-dirs"


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to query log directory usage on the specified brokers.")
    p.add_argument("--bootstrap-server", help="REQUIRED: the server(s) to use for bootstrapping")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--describe", action="store_true", help="Describe the specified log directories on the "
                                                           "specified brokers.")
    p.add_argument("--topic-list", default="", help="The list of topics to be queried in the form "
                                                    "\"topic1,topic2,topic3\". All topics will be queried if no "
                                                    "topic list is specified")
    p.add_argument("--broker-list", default="", help="The list of brokers to be queried in the form \"0,1,2\". All "
                                                     "brokers in the cluster will be queried if no broker list is "
                                                     "specified")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


def _error_name(code: int) -> str | None:
    if not code:
        return None
    from twisted_kafka.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def execute(argv: list[str] | None) -> None:
    args = parser().parse(argv)
    require(args, "bootstrap-server", "describe")
    topics = {t for t in args.topic_list.split(",") if t}
    try:
        requested = {int(b) for b in args.broker_list.split(",") if b}
    except ValueError:
        raise UsageError(f"--broker-list: {args.broker_list!r} is not a list of broker ids") from None
    with Admin(client_settings(args.bootstrap_server, args.command_config, client_id="log-dirs-tool")) as admin:
        cluster = {node.id for node in admin.wait(admin.client.describe_cluster(**admin.request_kwargs()),
                                                  "the cluster's brokers").nodes}
        missing = requested - cluster
        if missing:
            raise ToolError(f"ERROR: The given brokers do not exist from --broker-list: "
                            f"{','.join(map(str, sorted(missing)))}. Current existent brokers: "
                            f"{','.join(map(str, sorted(cluster)))}")
        brokers = sorted(requested or cluster)
        print("Querying brokers for log directories information")
        client = admin.kafka_python()
        answers = admin.call("DescribeLogDirs", 35, client.describe_log_dirs, None, brokers)
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    described = []
    for answer in answers:
        log_dirs = []
        for log_dir in answer["log_dirs"]:
            partitions = [{"partition": topic_partition(topic["name"], p["partition_index"]),
                           "size": p["partition_size"], "offsetLag": p["offset_lag"], "isFuture": p["is_future_key"]}
                          for topic in log_dir["topics"] if not topics or topic["name"] in topics
                          for p in topic["partitions"]]
            log_dirs.append({"partitions": partitions, "error": _error_name(log_dir["error_code"]),
                             "logDir": log_dir["log_dir"]})
        described.append({"broker": answer["broker"], "logDirs": log_dirs})
    print(compact_json({"brokers": described, "version": 1}))


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv))


if __name__ == "__main__":
    sys.exit(main())
