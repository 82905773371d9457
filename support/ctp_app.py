"""A consume-transform-produce application (confluent-kafka), run as a child process by the exactly-once tests.

    python -m support.ctp_app BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [--batch N] [--hold-after K]

It reads INPUT in consumer group GROUP (read_committed, no auto commit),
writes each record's key and value to OUTPUT in a transaction with
``send_offsets_to_transaction``, ``--batch`` records a transaction, the way
an exactly-once application is written: on an abortable error it aborts and
rewinds to the group's committed offsets; a fatal error (fenced) exits 3.
It exits 0 once the group's committed offsets reach the end of every
partition of INPUT.

``--hold-after K``: after K committed transactions it begins one more,
produces and flushes its records (they are in the log, the transaction is
open), prints ``HOLDING`` and waits for a line on stdin before committing it
-- the moment the tests kill the application or the broker.  Progress lines
(``COMMITTED <n>``) go to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import confluent_kafka
from confluent_kafka import KafkaException, TopicPartition

TIMEOUT = 60.0


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _rewind(consumer: confluent_kafka.Consumer) -> None:
    """Back to the group's committed offsets: the records of an aborted transaction are read again."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=TIMEOUT):
        if tp.offset < 0:
            tp.offset = confluent_kafka.OFFSET_BEGINNING
        consumer.seek(tp)


def _done(consumer: confluent_kafka.Consumer, partitions: int) -> bool:
    assignment = consumer.assignment()
    if len(assignment) < partitions:
        return False
    for tp in consumer.committed(assignment, timeout=TIMEOUT):
        _, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=TIMEOUT)
        if tp.offset < high:
            return False
    return True


#: librdkafka >= 2.10 "re-bootstraps" when every broker it knows is down (a one-broker cluster being
#: restarted): it forgets the brokers, but a transactional producer keeps the forgotten broker as the group's
#: coordinator, and send_offsets_to_transaction then waits for it forever, past its timeout (librdkafka issues
#: #5511 and #5456).  Applications of one-broker clusters turn re-bootstrapping off.
CLIENT = {"metadata.recovery.strategy": "none", "log_level": 0}


def run(args: argparse.Namespace) -> int:
    debug = {"debug": os.environ["CTP_APP_DEBUG"], "log_level": 7} if os.environ.get("CTP_APP_DEBUG") else {}
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed", **CLIENT,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **debug})
    producer = confluent_kafka.Producer({
        "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id, **CLIENT,
        "linger.ms": 5, **debug})
    producer.init_transactions(TIMEOUT)
    partitions = len(consumer.list_topics(args.input, timeout=TIMEOUT).topics[args.input].partitions)
    consumer.subscribe([args.input])
    committed = 0
    while True:
        records = consumer.consume(args.batch, 0.5)
        records = [r for r in records if not r.error()]
        if not records:
            if _done(consumer, partitions):
                _say("DONE")
                return 0
            continue
        try:
            producer.begin_transaction()
            for record in records:
                producer.produce(args.output, record.value(), record.key(), partition=record.partition())
            if args.hold_after is not None and committed == args.hold_after:
                producer.flush(TIMEOUT)
                _say("HOLDING")
                sys.stdin.readline()
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), TIMEOUT)
            _commit(producer)
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal():
                _say(f"FATAL {error}")
                return 3
            _say(f"ABORTING {error}")
            producer.abort_transaction(TIMEOUT)
            _rewind(consumer)
            continue
        committed += 1
        _say(f"COMMITTED {committed}")


def _commit(producer: confluent_kafka.Producer) -> None:
    """commit_transaction, again while the error is retriable (a coordinator that moved or restarts)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            producer.commit_transaction(TIMEOUT)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "transactional_id"):
        parser.add_argument(name)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--hold-after", type=int, default=None)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
