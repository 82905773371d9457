"""``twisted_kafka.testing.EmbeddedBroker``: a real broker in a child process, for other projects' tests.

* started from the installed package (``python -m twisted_kafka.cli``, a
  configuration written in its own temporary directory, nothing of the
  checkout), on loopback port 0, answering real clients; ``create_topic``
  waits for a leader, ``delete_topic`` deletes; the admin REST endpoint
  answers; ``stop()`` exits 0 and removes the directory;
* using it imports neither Twisted nor a Kafka client into the test process
  (its event loop and signal handlers stay the test's own);
* a broker that cannot start raises ``BrokerStartupError`` with the broker's
  own one-line reason as soon as the broker exits, and leaves nothing behind;
* SASL_SSL with certificates made on the spot and SCRAM users: confluent-kafka
  and kafka-python connect with ``client_config()``, a wrong password and an
  untrusting client are refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from support.wait import wait_until
from twisted_kafka.testing import BrokerStartupError, EmbeddedBroker
from twisted_kafka.testing.wire import AdminError

pytestmark = pytest.mark.integration


def produce_one(config: dict, topic: str, **extra) -> list:
    """Send one message and wait for its delivery report; the errors it reported (empty: acknowledged)."""
    reports: list = []
    errors: list = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 10000, "error_cb": errors.append, **extra})
    producer.produce(topic, b"value", key=b"key", on_delivery=lambda err, msg: reports.append(err))
    wait_until(lambda: producer.poll(0.05) is not None and reports, 30, what="a delivery report")
    return [r for r in reports if r is not None] + errors


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"num.io.threads": "2"}) as broker:
        yield broker


def test_the_broker_runs_from_the_package_in_its_own_directory(broker):
    process = broker.process
    assert process.command[:3] == [sys.executable, "-m", "twisted_kafka.cli"]
    assert Path(process.config_path).parent == broker.directory
    config = Path(process.config_path).read_text()
    assert "/etc/" not in config and "127.0.0.1:0" in config          # no file of a checkout; port 0
    assert str(broker.directory / "kafka-logs") in config
    # The override reached the broker, and the test defaults (a test sees only its own topics) hold.
    assert "--override" in process.command and "num.io.threads=2" in process.command
    assert broker.topic_names() == []


def test_create_topic_waits_for_leaders_and_sets_the_topic_config(broker):
    name = broker.create_topic("orders", partitions=3, config={"cleanup.policy": "compact"})
    assert name == "orders"
    admin = AdminClient(broker.client_config())
    topic = admin.list_topics(timeout=10).topics[name]
    assert sorted(topic.partitions) == [0, 1, 2] and all(p.leader == 0 for p in topic.partitions.values())
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
    described = next(iter(configs.values())).result(30)
    assert described["cleanup.policy"].value == "compact"
    assert produce_one(broker.client_config(), name) == []      # keyed: a compacted topic refuses keyless records

    with pytest.raises(AdminError) as exists:
        broker.create_topic("orders")
    assert exists.value.code == "TOPIC_ALREADY_EXISTS"
    broker.delete_topic(name)
    wait_until(lambda: name not in broker.topic_names(), 30, what="the topic to be deleted")


def test_unnamed_topics_get_unique_names(broker):
    first, second = broker.create_topic(), broker.create_topic()
    assert first != second and {first, second} <= set(broker.topic_names())


def test_the_admin_rest_endpoint_answers(broker):
    with urllib.request.urlopen(f"{broker.admin_rest_url}/v1/connections", timeout=10) as answer:
        listeners = {entry["listener"] for entry in json.load(answer)["listeners"]}
    assert listeners == {"PLAINTEXT", "CONTROLLER"}


def test_using_it_imports_neither_twisted_nor_a_kafka_client():
    program = (
        "import sys\n"
        "from twisted_kafka.testing import EmbeddedBroker\n"
        "with EmbeddedBroker() as broker:\n"
        "    broker.create_topic('t')\n"
        "    broker.delete_topic('t')\n"
        "    directory = broker.directory\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('twisted', 'confluent_kafka', 'aiokafka'))\n"
        "print(loaded, directory.exists())\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] False", done.stdout     # nothing imported; the directory was removed


def test_a_broker_that_cannot_start_raises_its_one_line_reason_and_leaves_nothing():
    broker = EmbeddedBroker({"num.io.threads": "many", "queued.max.requests": "5"}, startup_timeout=600)
    with pytest.raises(BrokerStartupError) as failed:
        broker.start()
    # The broker's own line, as soon as it exited (a 600 s timeout never came into it).
    assert failed.value.reason == ("Broker startup failed: Invalid value 'many' for configuration num.io.threads: "
                                   "not a number of type INT")
    assert failed.value.returncode == 1 and failed.value.reason in failed.value.log
    assert broker.process is None and not broker.running          # its temporary directory is gone


@pytest.fixture(scope="module")
def secured():
    with EmbeddedBroker(security="SASL_SSL", users={"alice": "alice-secret", "bob": "bob-secret"}) as broker:
        yield broker


class TestSaslSsl:
    def test_confluent_kafka_with_each_mechanism(self, secured):
        topic = secured.create_topic()
        config = secured.client_config()
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.username"] == "alice"
        assert Path(config["ssl.ca.location"]).read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"):
            assert produce_one(config, topic, **{"sasl.mechanism": mechanism}) == [], mechanism
        assert produce_one(secured.client_config(user="bob"), topic) == []

    def test_kafka_python_with_its_own_settings(self, secured):
        from kafka import KafkaProducer

        topic = secured.create_topic()
        settings = secured.client_config("kafka-python")
        assert settings["security_protocol"] == "SASL_SSL" and settings["sasl_mechanism"] == "SCRAM-SHA-512"
        producer = KafkaProducer(acks="all", **settings)
        try:
            assert producer.send(topic, b"value").get(timeout=30).offset == 0
        finally:
            producer.close()

    def test_a_wrong_password_and_a_client_without_the_ca_are_refused(self, secured):
        topic = secured.create_topic()
        errors = produce_one(secured.client_config(), topic, **{"sasl.password": "wrong"})
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        untrusting = {k: v for k, v in secured.client_config().items() if k != "ssl.ca.location"}
        errors = produce_one(untrusting, topic, **{"ssl.ca.location": "probe"})
        assert any(e.code() == KafkaError._SSL for e in errors), errors
        # The clients' listener is the only one that is not loopback-internal: the INTERNAL one is PLAINTEXT.
        assert set(secured.ports) == {"CLIENTS", "INTERNAL", "CONTROLLER"}
