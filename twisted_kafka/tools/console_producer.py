"""``twisted-kafka-console-producer``: Kafka's ``kafka-console-producer.sh``: standard input, a record a line.

    twisted-kafka-console-producer --bootstrap-server HOST:PORT --topic T [--producer.config FILE]
        [--property parse.key=true --property key.separator=:] [--producer-property acks=1] [--sync]
        [--compression-codec [gzip|snappy|lz4|zstd]]

Lines are read as Kafka's ``LineMessageReader`` reads them (``parse.key``,
``key.separator``, ``parse.headers``, ``headers.delimiter``,
``headers.separator``, ``headers.key.separator``, ``null.marker``,
``ignore.error``) and sent with librdkafka, with Kafka's console defaults
(``acks=-1``, ``linger.ms=1000`` unless ``--timeout``, ``request.timeout.ms=1500``,
``retries=3``, client id ``console-producer``).  A record the cluster
refuses is reported on its own line; the tool then exits 1 once standard
input ends.
"""

from __future__ import annotations

import re
import sys

from confluent_kafka import KafkaException, Producer

from .client_config import client_settings, load_client_properties
from .command import KafkaArgumentParser, ToolError, UsageError, run_tool
from .errors import describe_exception

PROG = "twisted-kafka-console-producer"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def parser() -> KafkaArgumentParser:
    p = KafkaArgumentParser(PROG, "This tool helps to read data from standard input and publish it to Kafka.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--topic", help="REQUIRED: The topic name to produce messages to.")
    p.add_argument("--producer.config", dest="producer_config", help="Producer config properties file.")
    p.add_argument("--command-config", help="The same as --producer.config (the name the other tools use).")
    p.add_argument("--producer-property", action="append", default=[],
                   help="A mechanism to pass user-defined properties in the form key=value to the producer.")
    p.add_argument("--property", action="append", default=[],
                   help="Properties of the line reader: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker, ignore.error.")
    p.add_argument("--reader-config", help="Config properties file for the message reader.")
    p.add_argument("--line-reader", help="Only Kafka's default LineMessageReader is available.")
    p.add_argument("--sync", action="store_true", help="Send each record and wait for its acknowledgement.")
    p.add_argument("--compression-codec", nargs="?", const="gzip",
                   help="The compression codec: either 'none', 'gzip', 'snappy', 'lz4', or 'zstd'.")
    p.add_argument("--batch-size", type=int, help="Number of bytes to batch per partition (batch.size).")
    p.add_argument("--max-partition-memory-bytes", type=int, help="The same as --batch-size.")
    p.add_argument("--message-send-max-retries", type=int, help="retries (default 3).")
    p.add_argument("--retry-backoff-ms", type=int, help="retry.backoff.ms (default 100).")
    p.add_argument("--timeout", type=int, help="linger.ms: how long records wait to be batched (default 1000).")
    p.add_argument("--request-required-acks", help="acks (default -1).")
    p.add_argument("--request-timeout-ms", type=int, help="request.timeout.ms (default 1500).")
    p.add_argument("--metadata-expiry-ms", type=int, help="metadata.max.age.ms.")
    p.add_argument("--socket-buffer-size", type=int, help="socket.send.buffer.bytes.")
    p.add_argument("--max-block-ms", type=int, help="Accepted for compatibility; no effect here.")
    p.add_argument("--max-memory-bytes", type=int, help="Accepted for compatibility; no effect here.")
    p.add_argument("--version", action="version", version=_version())
    return p


def _version() -> str:
    from twisted_kafka import __version__

    return __version__


def key_values(pairs: list[str]) -> dict[str, str]:
    """Kafka's ``CommandLineUtils.parseKeyValueArgs``: ``k=v`` (the value may hold '='; a missing one is "")."""
    result = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        result[key] = value
    return result


class LineReader:
    """Kafka's ``LineMessageReader``."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        self.parse_key = flag("parse.key")
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = flag("parse.headers")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = flag("ignore.error")
        self.null_marker = props.get("null.marker")
        distinct = [("headers.delimiter", self.headers_delimiter), ("headers.separator", self.headers_separator),
                    ("headers.key.separator", self.headers_key_separator)]
        for i, (a, va) in enumerate(distinct):
            for b, vb in distinct[i + 1:]:
                if va == vb:
                    raise UsageError(f"{a} and {b} may not be equal")
        if self.null_marker is not None:
            for name, value in [("key.separator", self.key_separator), *distinct]:
                if value == self.null_marker:
                    raise UsageError(f"null.marker and {name} may not be equal")
        self.line_number = 0

    def _split(self, enabled: bool, line: str, start: int, demarcation: str, what: str) -> str | None:
        if not enabled:
            return None
        index = line.find(demarcation, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise ToolError(f"No {what} found on line number {self.line_number}: '{line}'")
        return line[start:index]

    def _null(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else text.encode()

    def record(self, line: str) -> tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]]]:
        """``(key, value, headers)`` of one line (without its newline)."""
        self.line_number += 1
        headers_text = self._split(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        header_end = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key = self._split(self.parse_key, line, header_end, self.key_separator, "key separator")
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_end + key_end:]
        headers: list[tuple[str, str | bytes | None]] = []
        if headers_text is not None and headers_text != self.null_marker:
            for pair in re.split(self.headers_separator, headers_text):
                index = pair.find(self.headers_key_separator)
                if index == -1:
                    if self.ignore_error:
                        headers.append((pair, None))
                        continue
                    raise ToolError(f"No header key separator found in pair '{pair}' on line number "
                                    f"{self.line_number}")
                name = pair[:index]
                if name == self.null_marker:
                    raise ToolError(f"Header keys should not be equal to the null marker '{self.null_marker}' as "
                                    "they can't be null")
                headers.append((name, self._null(pair[index + len(self.headers_key_separator):])))
        return self._null(key), self._null(value), headers


def producer_config(args) -> dict[str, str]:
    if args.producer_config and args.command_config:
        raise UsageError("Give one of --producer.config and --command-config")
    overrides = key_values(args.producer_property)
    codec = args.compression_codec or "none"
    if codec not in CODECS:
        raise UsageError(f"--compression-codec: {codec!r} is not one of {', '.join(CODECS)}")
    settings = client_settings(args.bootstrap_server, args.producer_config or args.command_config,
                               overrides=overrides, client_id="console-producer", source="--producer.config")
    conf = settings.librdkafka
    conf["compression.type"] = codec
    # Kafka's maybeMergeOptions: a flag given wins; otherwise a property set wins; otherwise the console default.
    for key, given, default in (("linger.ms", args.timeout, 1000), ("acks", args.request_required_acks, "-1"),
                                ("request.timeout.ms", args.request_timeout_ms, 1500),
                                ("retries", args.message_send_max_retries, 3),
                                ("retry.backoff.ms", args.retry_backoff_ms, 100),
                                ("socket.send.buffer.bytes", args.socket_buffer_size, 102400),
                                ("batch.size", args.max_partition_memory_bytes or args.batch_size, 16384),
                                ("metadata.max.age.ms", args.metadata_expiry_ms, 300000)):
        if given is not None or key not in conf:
            conf[key] = str(given if given is not None else default)
    conf["log_level"] = "0"
    return conf


def execute(argv: list[str] | None) -> int:
    args = parser().parse(argv)
    for name in ("topic", "bootstrap_server"):
        if not getattr(args, name):
            raise UsageError(f'Missing required argument "[{name.replace("_", "-")}]"')
    if args.line_reader and not args.line_reader.endswith("LineMessageReader"):
        raise UsageError("--line-reader: only Kafka's default LineMessageReader is available")
    props = load_client_properties(args.reader_config)
    props.update(key_values(args.property))
    reader = LineReader(props)
    try:
        producer = Producer(producer_config(args))
    except KafkaException as exc:
        raise ToolError(describe_exception(exc)) from None
    failures = []

    def delivered(error, message) -> None:
        if error is not None:
            failures.append(error)
            value = message.value()
            print(f"Error when sending message to topic {message.topic()} with key: "
                  f"{'null' if message.key() is None else f'{len(message.key())} bytes'}, value: "
                  f"{'null' if value is None else f'{len(value)} bytes'} with error: {describe_exception(error)}",
                  file=sys.stderr)

    prompt = sys.stdin.isatty()
    try:
        while True:
            if prompt:
                print(">", end="", flush=True)
            line = sys.stdin.readline()
            if not line:
                break
            key, value, headers = reader.record(line.rstrip("\n").removesuffix("\r"))
            while True:
                try:
                    producer.produce(args.topic, value=value, key=key, headers=headers or None, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            if args.sync:
                producer.flush()
            producer.poll(0)
    finally:
        remaining = producer.flush(30)
    if remaining:
        raise ToolError(f"{remaining} record(s) were not acknowledged within 30 s")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, lambda: execute(argv))


if __name__ == "__main__":
    sys.exit(main())
