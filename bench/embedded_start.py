"""How fast an ``EmbeddedBroker`` is ready: start to first Metadata answer, to first acknowledged produce.

Run with ``.venv/bin/python bench/embedded_start.py`` (``--starts N``,
``--security SASL_SSL``, ``--quick``).  Any interpreter with twisted_kafka
installed runs it: the checkout's editable one (``.venv``), or a virtualenv
where the package was installed as a user installs it (``pip install .``,
byte-compiled) -- the figure a user gets; the first line names which.

Each start is what a test suite's first test pays, one after another:

* ``started``: ``EmbeddedBroker().start()`` returns -- the child process
  ran ``python -m twisted_kafka.cli`` (interpreter, imports, configuration,
  services) and logged its started line, read back here;
* ``metadata``: the first Metadata request answered on the clients'
  listener (a blocking socket, ``twisted_kafka.testing.wire``);
* ``topic``: ``create_topic()`` returned (CreateTopics, then Metadata until
  the partition has a leader) -- what the ``kafka_topic`` fixture does;
* ``produce``: a new confluent-kafka Producer (acks=all) had its first
  message acknowledged (delivery callback) -- the time from a test's
  fixture request (``kafka_broker`` + ``kafka_topic``) to its first produce
  acknowledged, measured from the call to ``start()``;
* ``group``: a new consumer of a new group (subscribe, earliest) received
  that message -- the broker's first group: ``__consumer_offsets`` created,
  the group's first rebalance (also reported on its own, from the
  consumer's creation);
* ``stop``: SIGTERM to exit.

``--override key=value`` (repeatable) starts the brokers with broker keys
changed, e.g. Kafka's own defaults instead of the test broker's
(``--override offsets.topic.num.partitions=50 --override
group.initial.rebalance.delay.ms=3000``).

Every phase is reported from the call to ``start()`` (median, min, max of
N starts), as is the broker's own "started in" figure (its services only,
from its log line).  The broker's CPU per start (all of its life: start,
the requests above, shutdown; ``RUSAGE_CHILDREN`` once it is reaped) and
the client's CPU per start (this process: the producer's librdkafka threads
included) are printed next to them.  N/2 starts run first and the N-scaling
check compares the two totals (``bench/common.py``).  The machine is shared:
the median is the figure, min and max say how much it moved.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

# A sibling module (this script's folder is sys.path[0]), not ``bench.common``: in a virtualenv where
# the package was installed as a user installs it, the checkout is not on sys.path, and the
# twisted_kafka measured is the installed one.
from common import ClientCpu, report_scaling, scaling_check

import twisted_kafka
from twisted_kafka.testing import EmbeddedBroker

PHASES = ("started", "metadata", "topic", "produce", "group", "stop")
_SELF_REPORTED = re.compile(r"started in ([\d.]+)s")


def one_start(security: str, overrides: dict[str, str]) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer

    times: dict[str, float] = {}
    began = time.perf_counter()
    broker = EmbeddedBroker(overrides, security=security).start()
    times["started"] = time.perf_counter() - began
    try:
        with broker.admin_connection() as admin:
            admin.metadata()
        times["metadata"] = time.perf_counter() - began
        topic = broker.create_topic("bench")
        times["topic"] = time.perf_counter() - began
        acked: list = []
        producer = Producer({**broker.client_config(), "acks": "all", "linger.ms": 0})
        producer.produce(topic, b"first", on_delivery=lambda err, msg: acked.append(err))
        deadline = time.monotonic() + 60          # aborts a stuck run; no phase ends on it
        while not acked:
            producer.poll(0.001)
            if time.monotonic() > deadline:
                raise RuntimeError("the first produce was not acknowledged within 60 s")
        if acked[0] is not None:
            raise RuntimeError(f"first produce failed: {acked[0]}")
        times["produce"] = time.perf_counter() - began
        joined = time.perf_counter()
        consumer = Consumer({**broker.client_config(), "group.id": "bench", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        while True:
            message = consumer.poll(0.01)
            if message is not None and not message.error():
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the new group's consumer got nothing within 60 s")
        times["group"] = time.perf_counter() - began
        times["group only"] = time.perf_counter() - joined
        consumer.close()
        match = _SELF_REPORTED.search(broker.log_text())
        times["services"] = float(match[1]) if match else float("nan")
        del producer                              # closed before the broker goes
    finally:
        stopping = time.perf_counter()
        status = broker.stop()
        times["stop"] = time.perf_counter() - stopping
    if status != 0:
        raise RuntimeError(f"the broker exited with status {status}")
    return times


def run(starts: int, security: str, overrides: dict[str, str]) -> tuple[list[dict[str, float]], float, float, float]:
    client = ClientCpu().start()
    broker_cpu = ClientCpu(children=True).start()
    began = time.perf_counter()
    results = [one_start(security, overrides) for _ in range(starts)]
    elapsed = time.perf_counter() - began
    client_seconds = client.stop()
    broker_seconds = broker_cpu.stop() - client_seconds
    return results, elapsed, client_seconds, broker_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=10, help="N: brokers started one after another (N/2 first)")
    parser.add_argument("--security", default="PLAINTEXT", help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    parser.add_argument("--quick", action="store_true", help="N=4: a smoke run")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a broker key")
    args = parser.parse_args()
    starts = 4 if args.quick else max(2, args.starts)
    overrides = dict(item.split("=", 1) for item in args.override)

    package = os.path.dirname(twisted_kafka.__file__)
    compiled = os.path.isdir(os.path.join(package, "__pycache__"))
    print(f"twisted_kafka {twisted_kafka.__version__} from {package} "
          f"({'byte-compiled' if compiled else 'NOT byte-compiled: every start compiles the modules'}); "
          f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"security {args.security}; overrides {overrides or 'none'}; N/2 = {starts // 2} starts, then N = {starts}")

    one_start(args.security, overrides)      # warm the page cache: the figures are those of a second test run
    _, half_elapsed, _, _ = run(starts // 2, args.security, overrides)
    results, elapsed, client_seconds, broker_seconds = run(starts, args.security, overrides)

    print(f"\n{'from start() to':<28}{'median':>9}{'min':>9}{'max':>9}   (seconds, N = {starts})")
    labels = {"started": "started line read", "metadata": "first Metadata answered",
              "topic": "topic created, leader known", "produce": "first produce acknowledged",
              "group": "a new group's first message", "group only": "(from the consumer's creation)",
              "stop": "stop (SIGTERM to exit)", "services": "(broker's own: services)"}
    for phase in (*PHASES[:-1], "group only", "services", "stop"):
        values = [r[phase] for r in results]
        print(f"{labels[phase]:<28}{statistics.median(values):>9.3f}{min(values):>9.3f}{max(values):>9.3f}")
    print(f"\nbroker CPU per start (its whole life): {broker_seconds / starts:.3f} s; "
          f"client CPU per start: {client_seconds / starts:.3f} s")
    report_scaling([scaling_check("total time of the starts", half_elapsed, elapsed)])


if __name__ == "__main__":
    main()
