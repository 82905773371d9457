"""``twisted-kafka-console-consumer``: Kafka's ``kafka-console-consumer.sh``: records to standard output.

    twisted-kafka-console-consumer --bootstrap-server HOST:PORT (--topic T | --include REGEX) [--from-beginning]
        [--partition P [--offset earliest|latest|N]] [--group G] [--max-messages N] [--timeout-ms MS]
        [--property print.key=true --property print.offset=true ...] [--consumer.config FILE]

Records are printed as Kafka's ``DefaultMessageFormatter`` prints them
(``print.timestamp``, ``print.partition``, ``print.offset``,
``print.headers``, ``print.key``, ``print.value``, ``key.separator``,
``line.separator``, ``headers.separator``, ``null.literal``); at the end
``Processed a total of N messages`` goes to standard error.  Without
``--group`` the consumer joins a group of its own (``console-consumer-NNNNN``)
and commits nothing, as Kafka's does.
"""

from __future__ import annotations

import random
import signal
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from .client_config import client_settings
from .command import KafkaArgumentParser, ToolError, UsageError, run_tool
from .console_producer import key_values
from .errors import describe_exception

PROG = "twisted-kafka-console-consumer"
#: librdkafka's message timestamp types, as Kafka's TimestampType prints them.
TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to read data from Kafka topics and outputs it to standard output.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--topic", help="The topic to consume on.")
    p.add_argument("--include", help="Regular expression specifying list of topics to include for consumption.")
    p.add_argument("--partition", type=int, help="The partition to consume from. Consumption starts from the end of "
                                                 "the partition unless '--offset' is specified.")
    p.add_argument("--offset", help="The offset to consume from (a non-negative number), or 'earliest' which means "
                                    "from beginning, or 'latest' which means from end")
    p.add_argument("--consumer-property", action="append", default=[],
                   help="A mechanism to pass user-defined properties in the form key=value to the consumer.")
    p.add_argument("--consumer.config", dest="consumer_config", help="Consumer config properties file.")
    p.add_argument("--command-config", help="The same as --consumer.config (the name the other tools use).")
    p.add_argument("--formatter", help="Only Kafka's DefaultMessageFormatter is available.")
    p.add_argument("--property", action="append", default=[],
                   help="The properties of the formatter: print.timestamp, print.key, print.offset, print.partition, "
                        "print.headers, print.value, key.separator, line.separator, headers.separator, null.literal")
    p.add_argument("--formatter-config", help="Config properties file to initialize the message formatter.")
    p.add_argument("--from-beginning", action="store_true",
                   help="If the consumer does not already have an established offset to consume from, start with "
                        "the earliest message present in the log rather than the latest message.")
    p.add_argument("--max-messages", type=int, help="The maximum number of messages to consume before exiting.")
    p.add_argument("--timeout-ms", type=int, help="If specified, exit if no message is available for consumption "
                                                  "for the specified interval.")
    p.add_argument("--skip-message-on-error", action="store_true", help="Accepted for compatibility (records are "
                                                                        "printed as bytes and cannot fail to format).")
    p.add_argument("--key-deserializer", help="Not supported: keys are printed as they are.")
    p.add_argument("--value-deserializer", help="Not supported: values are printed as they are.")
    p.add_argument("--enable-systest-events", action="store_true", help="Print shutdown_complete when done.")
    p.add_argument("--isolation-level", default=None, help="read_committed or read_uncommitted (the default).")
    p.add_argument("--group", help="The consumer group id of the consumer.")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


class Formatter:
    """Kafka's ``DefaultMessageFormatter``."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool) -> bool:
            return props[name].strip().lower() == "true" if name in props else default

        self.timestamp = flag("print.timestamp", False)
        self.key = flag("print.key", False)
        self.offset = flag("print.offset", False)
        self.partition = flag("print.partition", False)
        self.headers = flag("print.headers", False)
        self.value = flag("print.value", True)
        self.epoch = flag("print.epoch", False)
        self.key_separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, message) -> bytes:
        fields: list[bytes] = []
        if self.timestamp:
            kind, stamp = message.timestamp()
            fields.append(f"{TIMESTAMP_TYPES[kind]}:{stamp}".encode() if kind in TIMESTAMP_TYPES else b"NO_TIMESTAMP")
        if self.partition:
            fields.append(f"Partition:{message.partition()}".encode())
        if self.offset:
            fields.append(f"Offset:{message.offset()}".encode())
        if self.epoch:
            epoch = message.leader_epoch()
            fields.append(f"Epoch:{'NOT_PRESENT' if epoch is None else epoch}".encode())
        if self.headers:
            headers = message.headers() or []
            fields.append(self.headers_separator.join(
                name.encode() + b":" + (self.null_literal if value is None else value) for name, value in headers)
                if headers else b"NO_HEADERS")
        if self.key:
            fields.append(self.null_literal if message.key() is None else message.key())
        out = self.key_separator.join(fields)
        if self.value:
            value = message.value()
            out += (self.key_separator if fields else b"") + (self.null_literal if value is None else value)
            out += self.line_separator
        elif fields:
            out += self.line_separator
        return out


def check_args(args) -> None:
    """Kafka's ``ConsoleConsumerOptions.checkRequiredArgs`` and ``checkConsumerGroup``."""
    if bool(args.topic) == bool(args.include):
        raise UsageError("Exactly one of --include/--topic is required. ")
    if args.partition is not None:
        if not args.topic:
            raise UsageError("The topic is required when partition is specified.")
        if args.from_beginning and args.offset is not None:
            raise UsageError("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        raise UsageError("The partition is required when offset is specified.")
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if args.formatter and not args.formatter.endswith("DefaultMessageFormatter"):
        raise UsageError("--formatter: only Kafka's DefaultMessageFormatter is available")
    if args.key_deserializer or args.value_deserializer:
        raise UsageError("--key-deserializer/--value-deserializer are not supported: records are printed as bytes")
    if args.consumer_config and args.command_config:
        raise UsageError("Give one of --consumer.config and --command-config")


def start_offset(args) -> int:
    """Kafka's ``parseOffset``."""
    if args.offset is None:
        return OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    text = args.offset.lower()
    if text == "earliest":
        return OFFSET_BEGINNING
    if text == "latest":
        return OFFSET_END
    try:
        offset = int(text)
    except ValueError:
        offset = -1
    if offset < 0:
        raise UsageError(f"The provided offset value '{args.offset}' is incorrect. Valid values are 'earliest', "
                         "'latest', or a non-negative long.")
    return offset


def consumer_config(args) -> dict[str, str]:
    extra = key_values(args.consumer_property)
    settings = client_settings(args.bootstrap_server, args.consumer_config or args.command_config, overrides=extra,
                               client_id="console-consumer", source="--consumer.config")
    conf = settings.librdkafka
    groups = {g for g in (args.group, extra.get("group.id"), conf.get("group.id")) if g}
    if len(groups) > 1:
        raise UsageError("The group ids provided in different places (directly using '--group', via "
                         "'--consumer-property', or via '--consumer.config') do not match. Detected group ids: "
                         + ", ".join(f"'{g}'" for g in sorted(groups)))
    if groups and args.partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    if "auto.offset.reset" in conf:
        if args.from_beginning and conf["auto.offset.reset"] != "earliest":
            raise UsageError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset="
                             f"{conf['auto.offset.reset']}', please remove one option")
    else:
        conf["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    if args.isolation_level is not None or "isolation.level" not in conf:
        conf["isolation.level"] = args.isolation_level or "read_uncommitted"
    if groups:
        conf["group.id"] = groups.pop()
    else:
        conf["group.id"] = f"console-consumer-{random.randrange(100000)}"
        conf.setdefault("enable.auto.commit", "false")
    conf["log_level"] = "0"
    return conf


def execute(argv: list[str] | None) -> int:
    args = parser().parse(argv)
    check_args(args)
    props = key_values(args.property)
    if args.formatter_config:
        from .client_config import load_client_properties

        props = {**load_client_properties(args.formatter_config), **props}
    formatter = Formatter(props)
    offset = start_offset(args) if args.partition is not None else OFFSET_END
    try:
        consumer = Consumer(consumer_config(args))
    except KafkaException as exc:
        raise ToolError(describe_exception(exc)) from None
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    count = 0
    out = sys.stdout.buffer
    try:
        if args.partition is not None:
            consumer.assign([TopicPartition(args.topic, args.partition, offset)])
        else:
            consumer.subscribe([args.topic] if args.topic else ["^" + args.include.lstrip("^")])
        last = time.monotonic()
        while not stopping and (args.max_messages is None or count < args.max_messages):
            message = consumer.poll(0.1)
            if message is None:
                if args.timeout_ms is not None and (time.monotonic() - last) * 1000 >= args.timeout_ms:
                    break
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.fatal() or error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                     KafkaError.GROUP_AUTHORIZATION_FAILED,
                                                     KafkaError._AUTHENTICATION):
                    raise ToolError(describe_exception(error))
                print(f"WARN: {describe_exception(error)}", file=sys.stderr)
                continue
            last = time.monotonic()
            count += 1
            out.write(formatter.format(message))
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
        if args.enable_systest_events:
            print("shutdown_complete")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv))


if __name__ == "__main__":
    sys.exit(main())
