"""Transactional produce and consume-transform-produce on one twisted_kafka broker, with confluent-kafka.

Run with ``.venv/bin/python bench/transactions.py`` (``--scale S`` multiplies
the record counts, ``--quick`` divides them by 10).  One broker process is
started the README way (logs on disk) and every phase runs against it:

1. **produce**: records of 100 bytes to a 4-partition topic, acks=all, by an
   idempotent producer (no transactions) and by a transactional producer
   whose transactions hold 1, 100 and 10,000 records each
   (``begin_transaction``, the records, ``commit_transaction``).  Reported as
   records/s and transactions/s, with the broker's and the client's CPU per
   record.  A transaction of one record costs its AddPartitionsToTxn, EndTxn,
   the two writes of ``__transaction_state`` and the markers: that is the
   figure's subject.
2. **consume-transform-produce**: a read_committed consumer in a group reads
   the topic written in phase 1 (idempotent part), and a transactional
   producer writes each record to a sink topic and sends the consumer's
   offsets to the transaction (``send_offsets_to_transaction``), committing
   every 500 records.  Reported as records/s end to end.

Every phase runs at N/2 and at N records (N/2 first); the time should double
(``bench/common.py``'s check).  A phase ends when its records are committed;
none ends by a timeout (a phase not done within 300 s is an error).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

import psutil
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.common import ClientCpu, report_scaling, scaling_check  # noqa: E402
from bench.produce_consume import Ours  # noqa: E402

PARTITIONS = 4
VALUE = b"v" * 100
LIMIT = 300.0


def broker_cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def new_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(bootstrap: str, pid: int, topic: str, records: int, per_txn: int | None) -> tuple[float, float, float]:
    """(seconds, broker CPU s, client CPU s) to write ``records``: idempotent when ``per_txn`` is None."""
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True}
    if per_txn is not None:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if per_txn is not None:
        producer.init_transactions(30)
    else:       # the producer id and the metadata before the clock starts, as init_transactions() does
        producer.produce(topic, VALUE, partition=0)
        assert producer.flush(30) == 0
    cpu, broker_before = ClientCpu().start(), broker_cpu(pid)
    began = time.monotonic()
    sent = 0
    while sent < records:
        batch = min(per_txn or records, records - sent)
        if per_txn is not None:
            producer.begin_transaction()
        for i in range(batch):
            while True:
                try:
                    producer.produce(topic, VALUE, partition=(sent + i) % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.01)
        if per_txn is not None:
            producer.commit_transaction(LIMIT)
        sent += batch
        if time.monotonic() - began > LIMIT:
            raise RuntimeError(f"produce of {records} records not done within {LIMIT} s")
    assert producer.flush(LIMIT) == 0
    elapsed = time.monotonic() - began
    return elapsed, broker_cpu(pid) - broker_before, cpu.stop()


def transform(bootstrap: str, pid: int, source: str, records: int) -> tuple[float, float, float]:
    """Consume ``records`` from ``source`` (read_committed), write each to a sink topic in transactions of
    500 with the consumer's offsets; (seconds, broker CPU s, client CPU s)."""
    sink = new_topic(bootstrap)
    group = f"bench-ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-ctp-{uuid.uuid4().hex[:6]}",
                         "linger.ms": 5})
    producer.init_transactions(30)
    consumer.subscribe([source])
    first: list = []
    joined = time.monotonic()
    while not first:            # the group is formed before the clock starts; the first records are kept
        if time.monotonic() - joined > LIMIT:
            raise RuntimeError(f"the consumer got no record within {LIMIT} s")
        first = [msg for msg in consumer.consume(500, 0.5) if not msg.error()]
    cpu, broker_before = ClientCpu().start(), broker_cpu(pid)
    began = time.monotonic()
    done = 0
    producer.begin_transaction()
    in_txn = 0
    while done < records:
        if time.monotonic() - began > LIMIT:
            raise RuntimeError(f"consume-transform-produce of {records} records not done within {LIMIT} s")
        batch, first = (first, []) if first else (consumer.consume(500, 0.5), [])
        for msg in batch:
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(msg.error())
                continue
            producer.produce(sink, msg.value(), partition=msg.partition())
            done += 1
            in_txn += 1
            if done >= records:
                break
        if in_txn >= 500 or (done >= records and in_txn):
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
            producer.commit_transaction(LIMIT)
            in_txn = 0
            if done < records:
                producer.begin_transaction()
    elapsed = time.monotonic() - began
    consumer.close()
    return elapsed, broker_cpu(pid) - broker_before, cpu.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = args.scale / (10 if args.quick else 1)
    phases = [("idempotent", None, int(40_000 * scale)), ("txn of 1", 1, int(1_000 * scale)),
              ("txn of 100", 100, int(40_000 * scale)), ("txn of 10000", 10_000, int(80_000 * scale))]
    ours = Ours()
    checks = []
    try:
        print(f"twisted_kafka, 1 broker, {PARTITIONS} partitions, {len(VALUE)}-byte records, acks=all; "
              "confluent-kafka " + __import__("confluent_kafka").version()[0])
        print(f"{'phase':<16}{'records':>9}{'seconds':>9}{'records/s':>11}{'txn/s':>9}"
              f"{'broker us/rec':>15}{'client us/rec':>15}")
        source = None
        for name, per_txn, n in phases:
            times = []
            for records in (max(1, n // 2), max(1, n)):
                topic = new_topic(ours.bootstrap)
                if per_txn is None:
                    source = topic
                seconds, broker, client = produce(ours.bootstrap, ours.pid, topic, records, per_txn)
                times.append(seconds)
                txns = "" if per_txn is None else f"{records / per_txn / seconds:9.1f}"
                print(f"{name:<16}{records:>9}{seconds:>9.2f}{records / seconds:>11.0f}{txns:>9}"
                      f"{broker / records * 1e6:>15.1f}{client / records * 1e6:>15.1f}")
            checks.append(scaling_check(f"produce, {name}", *times))
        assert source is not None
        times = []
        n = int(40_000 * scale) // 2 * 2
        for records in (n // 2, n):
            seconds, broker, client = transform(ours.bootstrap, ours.pid, source, records)
            times.append(seconds)
            print(f"{'consume-transform-produce':<26}{records:>9}{seconds:>9.2f}{records / seconds:>11.0f}"
                  f"{'':>9}{broker / records * 1e6:>15.1f}{client / records * 1e6:>15.1f}")
        checks.append(scaling_check("consume-transform-produce", *times))
        report_scaling(checks)
    finally:
        ours.stop()


if __name__ == "__main__":
    main()
