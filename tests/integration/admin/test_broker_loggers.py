"""Logging on a real broker process: levels at start (``log.levels``, ``--log-level``), changed at runtime
through an AdminClient (KIP-412's BROKER_LOGGER resources) without a restart, the request log, JSON lines.

confluent-kafka (librdkafka) has no BROKER_LOGGER resource type; kafka-python's KafkaAdminClient has, and
sends IncrementalAlterConfigs (44) and DescribeConfigs (32) for it as Kafka's Java AdminClient does.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from support.broker_process import BrokerExited, BrokerProcess

BROKER_OVERRIDES = {"broker.id": "0"}
#: Kafka answers every logger with this source (ConfigHelper), set or inherited.
LOGGER_SOURCE = "DYNAMIC_BROKER_LOGGER_CONFIG"


@pytest.fixture(scope="module")
def kafka_admin(module_broker):
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, client_id="logger-admin")
    yield client
    client.close()


def loggers(client, *names: str) -> dict[str, tuple[str, str]]:
    """BROKER_LOGGER "0" described: name -> (level, source)."""
    resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs=list(names) or None)
    described = client.describe_configs([resource])["broker_logger"]["0"]
    return {name: (entry["value"], entry["config_source"]) for name, entry in described.items()}


def alter(client, ops: dict) -> str:
    """IncrementalAlterConfigs on BROKER_LOGGER "0": {logger: ("SET", level) or ("DELETE", None)}; the outcome."""
    resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs=ops)
    return client.alter_configs([resource], incremental=True, raise_on_unknown=False)["broker_logger"]["0"]


def list_topics(broker, client_id: str) -> None:
    AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": client_id}).list_topics(timeout=10)


def test_setting_the_request_logger_to_debug_at_runtime_starts_the_request_log_and_delete_stops_it(
        module_broker, kafka_admin):
    broker = module_broker
    assert loggers(kafka_admin, "kafka.request.logger") == {"kafka.request.logger": ("INFO", LOGGER_SOURCE)}
    list_topics(broker, "before-debug")

    mark = broker.log_mark()
    assert alter(kafka_admin, {"kafka.request.logger": ("SET", "DEBUG")}) == "OK"
    assert loggers(kafka_admin, "kafka.request.logger", "root") == {"kafka.request.logger": ("DEBUG", LOGGER_SOURCE),
                                                                    "root": ("INFO", LOGGER_SOURCE)}
    broker.wait_for_log(r"Updated the log level of kafka.request.logger to DEBUG", after=mark)
    list_topics(broker, "while-debug")
    line = broker.wait_for_log(r"Completed request: api=Metadata, .*client_id=while-debug", after=mark)
    for field in ("version=", "correlation_id=", "client=127.0.0.1:", "principal=User:ANONYMOUS",
                  "listener=PLAINTEXT", "total_time_ms=", "request_queue_time_ms=", "local_time_ms=",
                  "remote_time_ms=", "response_queue_time_ms=", "send_time_ms="):
        assert field in line, line
    assert "client_id=before-debug" not in broker.log_text()

    mark = broker.log_mark()
    assert alter(kafka_admin, {"kafka.request.logger": ("DELETE", None)}) == "OK"
    assert loggers(kafka_admin, "kafka.request.logger") == {"kafka.request.logger": ("INFO", LOGGER_SOURCE)}
    list_topics(broker, "after-delete")
    # A line logged after those requests were answered: had they been logged, their lines would be above it.
    assert alter(kafka_admin, {"kafka.controller": ("SET", "INFO")}) == "OK"
    broker.wait_for_log(r"Updated the log level of kafka.controller to INFO", after=mark)
    assert "Completed request:" not in broker.log_text()[mark:]


def test_unknown_loggers_and_levels_are_invalid_config(kafka_admin):
    assert alter(kafka_admin, {"kafka.controler": ("SET", "DEBUG")}) == (
        "[Error 40] InvalidConfigurationError: Logger kafka.controler does not exist!")
    assert alter(kafka_admin, {"kafka.controller": ("SET", "LOUD")}).startswith(
        "[Error 40] InvalidConfigurationError: Cannot set the log level of kafka.controller to LOUD")
    assert loggers(kafka_admin, "kafka.controller") == {"kafka.controller": ("INFO", LOGGER_SOURCE)}


class _WithRootLevel(BrokerProcess):
    def __init__(self, *args, root_level: str, **kwargs):
        self.root_level = root_level
        super().__init__(*args, **kwargs)

    @property
    def command(self) -> list[str]:
        return [*super().command, "--log-level", self.root_level]


def test_levels_at_start_and_json_lines(tmp_path):
    broker = _WithRootLevel(tmp_path, {"broker.id": "0", "log.format": "json",
                                       "log.levels": "kafka.request.logger=debug,kafka.log.LogCleaner=WARN"},
                            root_level="debug").start()
    try:
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="start-levels")
        try:
            got = loggers(client, "root", "kafka.request.logger", "kafka.log.LogCleaner", "kafka.controller")
        finally:
            client.close()
        assert got == {"root": ("DEBUG", LOGGER_SOURCE), "kafka.request.logger": ("DEBUG", LOGGER_SOURCE),
                       "kafka.log.LogCleaner": ("WARN", LOGGER_SOURCE), "kafka.controller": ("DEBUG", LOGGER_SOURCE)}
        list_topics(broker, "json-client")
        line = broker.wait_for_log(r'"api": "Metadata", .*"client_id": "json-client"')
    finally:
        assert broker.stop() == 0
    record = json.loads(line)
    assert (record["level"], record["logger"], record["api"]) == ("DEBUG", "kafka.request.logger", "Metadata")
    assert record["message"].startswith("Completed request: api=Metadata") and record["timestamp"].endswith("Z")
    records = [json.loads(text) for text in broker.log_text().splitlines() if text]   # every line is JSON
    assert len(records) > 10 and all(r["message"] and r["level"] and r["logger"] for r in records)
    assert any(r["message"].startswith("Broker 0 of cluster") for r in records)


def test_a_log_levels_name_that_is_no_logger_fails_startup_in_one_line(tmp_path):
    with pytest.raises(BrokerExited) as info:
        BrokerProcess(tmp_path, {"log.levels": "kafka.controler=DEBUG"}).start()
    assert info.value.returncode == 1
    assert info.value.reason == ("Broker startup failed: Invalid value 'kafka.controler=DEBUG' for configuration "
                                 "log.levels: Logger kafka.controler does not exist!")
