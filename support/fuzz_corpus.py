"""The fuzzer's seed corpus: the request frames real clients send, captured from a real broker.

``capture(work_dir)`` starts a broker (``BrokerProcess``) with a PLAINTEXT
and a SASL_PLAINTEXT listener, each advertised through a ``RecordingProxy``,
and runs real clients through them:

* confluent-kafka (librdkafka): the admin calls (create/describe/alter/
  delete topics and configs, partitions, records, offsets, groups, ACLs,
  SCRAM credentials, elections), an idempotent acks=all producer, acks=0
  and acks=1 producers with compression, a consumer in a group that
  commits, and SASL PLAIN and SCRAM-SHA-256 producers and group consumers;
* kafka-python: its admin client, a producer and a group consumer, and a
  SASL PLAIN producer;
* aiokafka: an idempotent producer and a group consumer.

Every connection the clients opened is kept with its frames in order
(``Corpus``): a replay of one starts where the client started
(ApiVersions, the SASL handshake) and goes as deep as the client went.
``Corpus.save``/``Corpus.load`` keep it as JSON lines (base64 frames) so a
long fuzzing run can reuse one capture.  ``CaptureBroker`` keeps the broker
running after the capture, for a short test that fuzzes the broker it
captured from.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import struct
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from support.broker_process import BrokerProcess
from support.recording_proxy import RecordedConnection, RecordingProxy
from support.sasl_listeners import PLAIN_JAAS

__all__ = ["Corpus", "CaptureBroker", "capture", "CAPTURE_BROKER_OVERRIDES", "PLAIN_JAAS", "SCRAM_USER"]

#: The SCRAM-SHA-256 user the capture creates (through AlterUserScramCredentials) and logs in as.
SCRAM_USER = ("fuzz-scram", "fuzz-scram-secret")

#: The capture broker's settings besides its listeners: a group's first rebalance without the initial
#: delay, so the group clients finish quickly.
CAPTURE_BROKER_OVERRIDES = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
    "num.partitions": "2",
}

#: Seconds any one client step may take before the capture gives up on it (and says so).
STEP_TIMEOUT = 30.0


@dataclass
class Corpus:
    """Captured connections (``RecordedConnection``: listener, frames, label)."""

    connections: list[RecordedConnection]

    @property
    def frames(self) -> int:
        return sum(len(c.frames) for c in self.connections)

    def api_keys(self) -> dict[int, int]:
        """How many captured frames carry each api key (SASL v0 raw tokens counted under -1)."""
        counts: dict[int, int] = {}
        for connection in self.connections:
            for frame in connection.frames:
                key = struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else -1
                counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    def save(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            for c in self.connections:
                out.write(json.dumps({"listener": c.listener, "label": c.label,
                                      "frames": [base64.b64encode(f).decode() for f in c.frames]}) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Corpus:
        connections = []
        with open(path, encoding="utf-8") as source:
            for line in source:
                entry = json.loads(line)
                connections.append(RecordedConnection(entry["listener"], [base64.b64decode(f) for f in entry["frames"]],
                                                      entry.get("label", "")))
        return cls(connections)


# -- the capture --------------------------------------------------------------------------------------


class CaptureBroker:
    """A broker whose PLAINTEXT and SASL_PLAINTEXT listeners are advertised through recording proxies."""

    def __init__(self, work_dir: str | Path):
        self.plain = RecordingProxy("PLAINTEXT").start()
        self.sasl = RecordingProxy("SASL_PLAINTEXT").start()
        overrides = {
            "listeners": ("PLAINTEXT://127.0.0.1:{port:PLAINTEXT},SASL_PLAINTEXT://127.0.0.1:{port:SASL_PLAINTEXT},"
                          "CONTROLLER://127.0.0.1:{port:CONTROLLER}"),
            "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{self.plain.port},"
                                     f"SASL_PLAINTEXT://127.0.0.1:{self.sasl.port},"
                                     "CONTROLLER://127.0.0.1:{port:CONTROLLER}"),
            "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                               "CONTROLLER:PLAINTEXT"),
            "inter.broker.listener.name": "PLAINTEXT",
            "control.plane.listener.name": "CONTROLLER",
            **CAPTURE_BROKER_OVERRIDES,
        }
        try:
            self.broker = BrokerProcess(work_dir, overrides).start()
        except BaseException:
            self.plain.stop()
            self.sasl.stop()
            raise
        self.plain.target_port = self.broker.port("PLAINTEXT")
        self.sasl.target_port = self.broker.port("SASL_PLAINTEXT")

    def record(self, *, quick: bool = False, log: Callable[[str], None] = print) -> Corpus:
        """Run the clients through the proxies, then stop the proxies (the broker goes on running:
        its own listeners are where a fuzzer sends); the frames the clients sent.

        ``quick`` runs confluent-kafka only (admin calls, producers, a group consumer, SASL).
        """
        plain, sasl = self.plain, self.sasl
        try:
            for name, step in QUICK_STEPS if quick else STEPS:
                plain.label = sasl.label = name
                began = time.monotonic()
                try:
                    step(f"127.0.0.1:{plain.port}", f"127.0.0.1:{sasl.port}")
                    log(f"capture: {name} ({time.monotonic() - began:.1f}s)")
                except Exception as exc:     # a step that fails still leaves what it sent
                    log(f"capture: {name} failed after {time.monotonic() - began:.1f}s: {exc!r}")
        finally:
            plain.stop()
            sasl.stop()
        return Corpus([c for c in plain.connections + sasl.connections if c.frames])


def capture(work_dir: str | Path, *, log: Callable[[str], None] = print, quick: bool = False) -> Corpus:
    """Run the real clients against a fresh broker through recording proxies; the frames they sent."""
    capturing = CaptureBroker(work_dir)
    try:
        return capturing.record(quick=quick, log=log)
    finally:
        capturing.broker.stop(timeout=60)


# -- confluent-kafka ----------------------------------------------------------------------------------


def _wait_all(futures) -> None:
    values = futures.values() if isinstance(futures, dict) else futures
    for future in values:
        with contextlib.suppress(Exception):       # an error answer is a capture too
            future.result(timeout=STEP_TIMEOUT)


def confluent_admin(bootstrap: str, _sasl: str) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, ElectionType, TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "fuzz-confluent-admin"})
    _wait_all(admin.create_topics([NewTopic("fz-a", 3, 1), NewTopic("fz-b", 1, 1, config={"cleanup.policy": "compact"}),
                                   NewTopic("fz-tmp", 2, 1)], operation_timeout=10))
    _wait_all(admin.create_topics([NewTopic("fz-check", 1, 1)], validate_only=True))
    _wait_all(admin.create_partitions([NewPartitions("fz-tmp", 4)], operation_timeout=10))
    _wait_all(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "fz-a"),
                                      ConfigResource(ResourceType.BROKER, "0")]))
    _wait_all(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "fz-tmp", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])]))
    with warnings.catch_warnings():            # deprecated in favour of the incremental API, still sent
        warnings.simplefilter("ignore", DeprecationWarning)
        _wait_all(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "fz-tmp",
                                                      set_config={"segment.ms": "600000"})]))
    admin.list_topics(timeout=STEP_TIMEOUT)
    with contextlib.suppress(Exception):
        admin.describe_cluster(request_timeout=10).result(timeout=STEP_TIMEOUT)
    with contextlib.suppress(Exception):
        admin.describe_topics(TopicCollection(["fz-a", "fz-b"])).get("fz-a").result(timeout=STEP_TIMEOUT)
    _wait_all(admin.list_offsets({TopicPartition("fz-a", 0): OffsetSpec.latest(),
                                  TopicPartition("fz-a", 1): OffsetSpec.earliest(),
                                  TopicPartition("fz-a", 2): OffsetSpec.max_timestamp()}))
    _wait_all(admin.delete_records([TopicPartition("fz-tmp", 0, 0)]))
    _wait_all(admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        SCRAM_USER[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), SCRAM_USER[1].encode())]))
    _wait_all(admin.describe_user_scram_credentials([SCRAM_USER[0]]))
    binding = AclBinding(ResourceType.TOPIC, "fz-a", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    _wait_all(admin.create_acls([binding]))
    with contextlib.suppress(Exception):
        admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                             AclOperation.ANY, AclPermissionType.ANY)).result(timeout=STEP_TIMEOUT)
    _wait_all(admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "fz-a", ResourcePatternType.LITERAL, None,
                                                  None, AclOperation.ANY, AclPermissionType.ANY)]))
    with contextlib.suppress(Exception):
        admin.list_consumer_groups(request_timeout=10).result(timeout=STEP_TIMEOUT)
    _wait_all(admin.describe_consumer_groups(["fz-group-confluent"]))
    _wait_all(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("fz-group-confluent")]))
    _wait_all(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "fz-group-admin", [TopicPartition("fz-a", 0, 0)])]))
    _wait_all(admin.delete_consumer_groups(["fz-group-admin"]))
    with contextlib.suppress(Exception):
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("fz-a", 0)]).result(timeout=STEP_TIMEOUT)
    _wait_all(admin.delete_topics(["fz-tmp"], operation_timeout=10))


def _confluent_produce(conf: dict, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(conf)
    for i in range(n):
        producer.produce(topic, key=f"k{i % 7}".encode(), value=f"value-{i}".encode() * 3,
                         headers=[("h", b"v")] if i % 2 else None)
        producer.poll(0)
    remaining = producer.flush(STEP_TIMEOUT)
    if remaining:
        raise RuntimeError(f"{remaining} message(s) not delivered")


def confluent_producers(bootstrap: str, _sasl: str) -> None:
    base = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    _confluent_produce({**base, "client.id": "fuzz-idempotent", "enable.idempotence": True, "acks": "all",
                        "compression.type": "lz4"}, "fz-a", 60)
    _confluent_produce({**base, "client.id": "fuzz-acks0", "acks": 0, "compression.type": "zstd"}, "fz-a", 20)
    _confluent_produce({**base, "client.id": "fuzz-acks1", "acks": 1, "compression.type": "snappy"}, "fz-b", 20)


def _confluent_group(conf: dict, topic: str, group: str, want: int) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 10000, "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + STEP_TIMEOUT
    try:
        while got < want and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
                if got % 10 == 0:
                    consumer.commit(asynchronous=False)
        with contextlib.suppress(Exception):      # nothing new to commit
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()             # LeaveGroup
    if got < want:
        raise RuntimeError(f"consumed {got} of {want}")


def confluent_group(bootstrap: str, _sasl: str) -> None:
    _confluent_group({"bootstrap.servers": bootstrap, "client.id": "fuzz-consumer"}, "fz-a", "fz-group-confluent",
                     40)


def confluent_sasl(_bootstrap: str, sasl: str) -> None:
    plain = {"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "alice", "sasl.password": "alice-secret"}
    _confluent_produce({**plain, "client.id": "fuzz-sasl-plain", "acks": "all"}, "fz-a", 10)
    scram = {"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.username": SCRAM_USER[0], "sasl.password": SCRAM_USER[1]}
    _confluent_produce({**scram, "client.id": "fuzz-sasl-scram", "enable.idempotence": True}, "fz-b", 10)
    _confluent_group({**scram, "client.id": "fuzz-sasl-consumer"}, "fz-b", "fz-group-sasl", 10)


# -- kafka-python -------------------------------------------------------------------------------------


def kafka_python_clients(bootstrap: str, sasl: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fuzz-kp-admin", request_timeout_ms=10000)
    try:
        with contextlib.suppress(Exception):
            admin.create_topics([NewTopic("fz-kp", 2, 1), NewTopic("fz-kp-tmp", 1, 1)], timeout_ms=10000)
        with contextlib.suppress(Exception):
            admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "fz-kp")])
        with contextlib.suppress(Exception):
            admin.list_consumer_groups()
        with contextlib.suppress(Exception):
            admin.describe_consumer_groups(["fz-group-kp"])
        with contextlib.suppress(Exception):
            admin.delete_topics(["fz-kp-tmp"], timeout_ms=10000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="fuzz-kp-producer", acks="all",
                             compression_type="gzip", linger_ms=5)
    try:
        for i in range(30):
            producer.send("fz-kp", key=b"k%d" % (i % 3), value=b"kafka-python %d" % i)
        producer.flush(STEP_TIMEOUT)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="fuzz-kp-consumer", group_id="fz-group-kp",
                             auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
                             session_timeout_ms=10000, heartbeat_interval_ms=1000)
    try:
        consumer.subscribe(["fz-kp"])
        consumer.topics()
        got = 0
        deadline = time.monotonic() + STEP_TIMEOUT
        while got < 30 and time.monotonic() < deadline:
            got += sum(len(records) for records in consumer.poll(timeout_ms=500).values())
        consumer.commit()
    finally:
        consumer.close()
    sasl_producer = KafkaProducer(bootstrap_servers=sasl, client_id="fuzz-kp-sasl", security_protocol="SASL_PLAINTEXT",
                                  sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                  sasl_plain_password="alice-secret")
    try:
        for i in range(5):
            sasl_producer.send("fz-kp", value=b"sasl %d" % i)
        sasl_producer.flush(STEP_TIMEOUT)
    finally:
        sasl_producer.close()


# -- aiokafka -----------------------------------------------------------------------------------------


def aiokafka_clients(bootstrap: str, _sasl: str) -> None:
    asyncio.run(_aiokafka(bootstrap))


async def _aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="fuzz-aio-producer", enable_idempotence=True,
                                compression_type="gzip")
    await producer.start()
    try:
        for i in range(20):
            await producer.send("fz-a", value=b"aiokafka %d" % i, key=b"a")
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("fz-a", bootstrap_servers=bootstrap, client_id="fuzz-aio-consumer",
                                group_id="fz-group-aio", auto_offset_reset="earliest", enable_auto_commit=False,
                                fetch_max_wait_ms=100, session_timeout_ms=10000, heartbeat_interval_ms=1000)
    await consumer.start()
    try:
        got = 0
        deadline = time.monotonic() + STEP_TIMEOUT
        while got < 20 and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            got += sum(len(records) for records in batch.values())
        await consumer.commit()
    finally:
        await consumer.stop()


STEPS: list[tuple[str, Callable[[str, str], None]]] = [
    ("confluent-kafka admin", confluent_admin),
    ("confluent-kafka producers", confluent_producers),
    ("confluent-kafka group consumer", confluent_group),
    ("confluent-kafka SASL", confluent_sasl),
    ("kafka-python", kafka_python_clients),
    ("aiokafka", aiokafka_clients),
]
QUICK_STEPS = STEPS[:4]
