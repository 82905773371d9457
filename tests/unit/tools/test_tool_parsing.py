"""The tools' own parsing: Java client properties into librdkafka's and kafka-python's settings, Kafka's
--add-config and SCRAM values, the console reader and formatter, offsets' dates and durations."""

from __future__ import annotations

import datetime

import pytest

from twisted_kafka.tools.client_config import client_settings
from twisted_kafka.tools.command import ToolError, UsageError
from twisted_kafka.tools.configs import parse_add_config, scram_credential
from twisted_kafka.tools.console_consumer import Formatter
from twisted_kafka.tools.console_producer import LineReader
from twisted_kafka.tools.consumer_groups import parse_datetime, parse_duration, parse_topic_partitions
from twisted_kafka.tools.topics import include_list, parse_replica_assignment

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
        'password="an admin=secret";')


def properties(tmp_path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


def test_java_client_properties_become_librdkafka_and_kafka_python_settings(tmp_path, capsys):
    path = properties(tmp_path, f"""
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config={JAAS}
ssl.truststore.type=PEM
ssl.truststore.location=/etc/ca.pem
ssl.keystore.type=PEM
ssl.keystore.location=/etc/client.pem
ssl.endpoint.identification.algorithm=
default.api.timeout.ms=5000
receive.buffer.bytes=65536
key.serializer=org.apache.kafka.common.serialization.StringSerializer
bootstrap.servers=ignored:9092
""")
    settings = client_settings("127.0.0.1:9094", path, client_id="topics-tool")
    assert settings.librdkafka == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
        "sasl.password": 'an admin=secret', "ssl.endpoint.identification.algorithm": "none",
        "socket.receive.buffer.bytes": "65536", "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/client.pem", "ssl.key.location": "/etc/client.pem",
        "bootstrap.servers": "127.0.0.1:9094", "client.id": "topics-tool"}
    assert settings.timeout == 5.0
    assert capsys.readouterr().err.splitlines() == [
        f"WARN: {path}: key.serializer has no meaning outside a JVM client and is ignored"]
    assert settings.kafka_python_settings() == {
        "bootstrap_servers": ["127.0.0.1:9094"], "client_id": "topics-tool", "request_timeout_ms": 5000,
        "security_protocol": "SASL_SSL", "ssl_cafile": "/etc/ca.pem", "ssl_certfile": "/etc/client.pem",
        "ssl_keyfile": "/etc/client.pem", "sasl_plain_username": "admin", "sasl_plain_password": 'an admin=secret',
        "sasl_mechanism": "SCRAM-SHA-512", "ssl_check_hostname": False}


@pytest.mark.parametrize(("text", "named"), [
    ("ssl.truststore.location=/etc/ts.jks\n", "ssl.truststore.location: a JKS trust store"),
    ("ssl.keystore.location=/etc/ks.jks\nssl.keystore.type=JKS\n", "ssl.keystore.location: a JKS key store"),
    ("sasl.jaas.config=com.example.Custom required;\n", "com.example.Custom is not supported"),
    ("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\";\n",
     'needs username="..." and password="..."'),
    ("default.api.timeout.ms=soon\n", "default.api.timeout.ms must be an integer"),
])
def test_what_cannot_be_used_is_named(tmp_path, text, named):
    with pytest.raises(ToolError, match=named):
        client_settings("h:1", properties(tmp_path, text))


def test_a_pkcs12_key_store_serves_librdkafka_but_not_kafka_python(tmp_path):
    settings = client_settings("h:1", properties(tmp_path, "ssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12\n"
                                                           "ssl.keystore.password=pw\n"))
    assert settings.librdkafka["ssl.keystore.location"] == "/k.p12"
    with pytest.raises(ToolError, match="ssl.keystore.location cannot be used for this command"):
        settings.kafka_python_settings()


def test_add_config_splits_outside_brackets_and_scram_values():
    assert parse_add_config("retention.ms=1000,cleanup.policy=[compact,delete], k = v") == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete", "k": "v"}
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=p=,w]") == {
        "SCRAM-SHA-256": "iterations=8192,password=p=,w"}
    with pytest.raises(UsageError, match="Invalid entity config"):
        parse_add_config("novalue")
    with pytest.raises(UsageError, match="Invalid character found for config key: a b"):
        parse_add_config("a b=1")
    assert scram_credential("SCRAM-SHA-256", "iterations=8192,password=p,w") == ("p,w", 8192)
    assert scram_credential("SCRAM-SHA-512", "password=secret") == ("secret", 4096)
    assert scram_credential("SCRAM-SHA-512", "password=secret,iterations=5000") == ("secret", 5000)
    with pytest.raises(UsageError, match="Iterations 10 is less than the minimum 4096"):
        scram_credential("SCRAM-SHA-256", "iterations=10,password=x")


def test_topic_arguments():
    assert parse_replica_assignment("1:2, 2:3") == {0: [1, 2], 1: [2, 3]}
    with pytest.raises(ToolError, match="Partition 1 has different replication factor: \\[2\\]"):
        parse_replica_assignment("1:2,2")
    with pytest.raises(ToolError, match="may not contain duplicate entries: 1"):
        parse_replica_assignment("1:1")
    pattern = include_list("'orders.*,audit'")
    assert pattern is not None
    assert [t for t in ("orders", "orders-eu", "audit", "audits") if pattern.fullmatch(t)] == [
        "orders", "orders-eu", "audit"]
    assert parse_topic_partitions("t:0,2") == [("t", 0), ("t", 2)]
    with pytest.raises(UsageError, match="Invalid partition 'x'"):
        parse_topic_partitions("t:x")


def test_reset_times():
    assert parse_datetime("2026-11-01T08:00:00.000") == int(
        datetime.datetime(2026, 11, 1, 8, tzinfo=datetime.UTC).timestamp() * 1000)
    assert parse_datetime("2026-11-01T08:00:00.250+01:00") == int(
        datetime.datetime(2026, 11, 1, 7, 0, 0, 250000, tzinfo=datetime.UTC).timestamp() * 1000)
    with pytest.raises(UsageError, match="does not contain a 'T'"):
        parse_datetime("2026-11-01")
    assert parse_duration("P1DT2H30M") == datetime.timedelta(days=1, hours=2, minutes=30)
    assert parse_duration("PT0.5S") == datetime.timedelta(seconds=0.5)
    with pytest.raises(UsageError, match="cannot be parsed to a Duration"):
        parse_duration("1 hour")


def test_line_reader_is_kafkas():
    reader = LineReader({"parse.key": "true", "key.separator": ":", "parse.headers": "true",
                         "headers.delimiter": "|", "null.marker": "~"})
    assert reader.record("h1:a,h2:~|k:v:w") == (b"k", b"v:w", [("h1", b"a"), ("h2", None)])
    assert reader.record("~|~:v") == (None, b"v", [])
    with pytest.raises(ToolError, match="No headers delimiter found on line number 3: 'plain'"):
        reader.record("plain")
    lenient = LineReader({"parse.key": "true", "ignore.error": "true"})
    assert lenient.record("no key here") == (None, b"no key here", [])
    with pytest.raises(UsageError, match="null.marker and key.separator may not be equal"):
        LineReader({"null.marker": "\t"})


class Message:
    def __init__(self, key, value, headers=None):
        self._key, self._value, self._headers = key, value, headers

    def timestamp(self):
        return (1, 1700000000000)

    def partition(self):
        return 2

    def offset(self):
        return 41

    def leader_epoch(self):
        return None

    def key(self):
        return self._key

    def value(self):
        return self._value

    def headers(self):
        return self._headers


def test_formatter_is_kafkas_default_message_formatter():
    everything = Formatter({"print.timestamp": "true", "print.partition": "true", "print.offset": "true",
                            "print.headers": "true", "print.key": "true"})
    assert everything.format(Message(b"k", b"v", [("a", b"1"), ("b", None)])) == \
        b"CreateTime:1700000000000\tPartition:2\tOffset:41\ta:1,b:null\tk\tv\n"
    assert everything.format(Message(None, None)) == \
        b"CreateTime:1700000000000\tPartition:2\tOffset:41\tNO_HEADERS\tnull\tnull\n"
    assert Formatter({}).format(Message(b"k", b"v")) == b"v\n"
    keys_only = Formatter({"print.key": "true", "print.value": "false", "key.separator": "=", "line.separator": ";"})
    assert keys_only.format(Message(b"k", b"v")) == b"k;"
