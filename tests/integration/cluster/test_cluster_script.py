"""``make cluster`` as shipped: bin/twisted-kafka-cluster with etc/cluster/, run as a user runs it.

The script runs outside any virtualenv (``support/user_env.py``), with
the shipped configuration files; ``--port-offset`` (a random one whose ports
are all free, below the kernel's ephemeral range) and ``--data-dir`` (the
test's directory) keep it away from a developer's cluster and from other
runs of this test.  One run shows, in order:

* a broker that cannot start (its admin port is taken) is reported with its
  "Broker startup failed" line, and ZooKeeper and the other brokers keep
  running; ``restart 3`` starts it once the port is free;
* all three brokers serve a topic with three replicas (acks=all produce and
  consume, confluent-kafka);
* ``kill -9`` of a broker is reported; the others keep running, its
  partitions move to them, and ``restart 2`` brings it back into the ISRs;
* SIGINT stops the brokers one at a time, the controller last, each with a
  controlled shutdown (the last one has no replica left to move anything to),
  then ZooKeeper, and the script exits 0 within a bound.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from support.broker_process import REPO_ROOT
from support.user_env import system_python_lacks_twisted_kafka, user_env
from support.wait import wait_until
from twisted_kafka.config import load_properties

SCRIPT = REPO_ROOT / "bin" / "twisted-kafka-cluster"
CONFIGS = REPO_ROOT / "etc" / "cluster"
#: Ctrl-C must stop the whole cluster within this (the brokers' controlled shutdowns take a few seconds).
STOP_BOUND_SECONDS = 20.0


def shipped_ports() -> dict[str, dict[str, int]]:
    """Per process of etc/cluster/: its ports as the shipped files name them."""
    zookeeper = load_properties(CONFIGS / "zookeeper.properties")
    ports = {"zookeeper": {"client": int(zookeeper["clientPort"])}}
    for path in sorted(CONFIGS.glob("broker-*.properties")):
        props = load_properties(path)
        listeners = dict(re.findall(r"(\w+)://[^,]*:(\d+)", props["listeners"]))
        ports[path.stem] = {name: int(port) for name, port in listeners.items()}
        ports[path.stem]["admin"] = int(re.search(r":(\d+)$", props["admin.rest.listener"]).group(1))
    return ports


def free_offset(ports: dict[str, dict[str, int]]) -> int:
    """A port offset under which every port of the cluster is free now, below the ephemeral range (32768)."""
    wanted = [port for named in ports.values() for port in named.values()]
    for _ in range(100):
        offset = random.randrange(10000, 32768 - max(wanted))
        try:
            with contextlib.ExitStack() as stack:
                for port in wanted:
                    probe = stack.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port + offset))
            return offset
        except OSError:
            continue
    raise AssertionError("no port offset with all of the cluster's ports free")


class ClusterRun:
    """The script in a child process; its output lines collected as they come."""

    def __init__(self, data_dir: Path, offset: int, env: dict[str, str]):
        self.data_dir = data_dir
        self.env = env
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [str(SCRIPT), "--port-offset", str(offset), "--data-dir", str(data_dir)],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.descendants: set[int] = set()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, pattern: str, timeout: float = 60) -> re.Match:
        def found():
            self._remember_descendants()
            match = next((m for m in map(re.compile(pattern).search, list(self.lines)) if m), None)
            if match is None and self.process.poll() is not None:
                raise AssertionError(f"the script exited ({self.process.returncode}) before printing "
                                     f"{pattern!r}:\n{self.output()}")
            return match
        return wait_until(found, timeout, what=f"a line matching {pattern!r}", interval=0.1)

    def command(self, *words: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """``bin/twisted-kafka-cluster WORDS --data-dir DIR``, as a user types it in another terminal."""
        return subprocess.run([str(SCRIPT), *words, "--data-dir", str(self.data_dir)], cwd=REPO_ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def status(self) -> dict[str, str]:
        done = self.command("status", timeout=30)
        assert done.returncode == 0, done
        return dict(line.split(": ", 1) for line in done.stdout.splitlines())

    def _remember_descendants(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            self.descendants |= {p.pid for p in psutil.Process(self.process.pid).children(recursive=True)}

    def kill_leftovers(self) -> None:
        """After a failed test: nothing of this cluster may outlive it."""
        self._remember_descendants()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(60)
        for pid in [self.process.pid, *self.descendants]:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        self.process.wait()


def pid_of(status: str) -> int:
    match = re.fullmatch(r"running \(pid (\d+)\)", status)
    assert match, status
    return int(match.group(1))


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    from confluent_kafka import Producer

    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 30000})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(40) == 0, "records left undelivered"
    assert not errors, errors[:3]


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_make_cluster_as_shipped(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    env = user_env()
    assert system_python_lacks_twisted_kafka(env), "python3 on a user's PATH has twisted_kafka: nothing to show"
    shipped = shipped_ports()
    offset = free_offset(shipped)
    ports = {name: {key: port + offset for key, port in named.items()} for name, named in shipped.items()}
    bootstrap = {n: f"127.0.0.1:{ports[f'broker-{n}']['PLAINTEXT']}" for n in (1, 2, 3)}
    admin = None

    def metadata(topic=None):
        return admin.list_topics(topic, timeout=10)

    run = None
    try:
        # Broker 3's admin port is taken: it cannot start; the rest of the cluster runs.
        with socket.socket() as held:
            held.bind(("127.0.0.1", ports["broker-3"]["admin"]))
            held.listen()
            run = ClusterRun(tmp_path / "d", offset, env)
            run.wait_line(rf"^broker-3 exited with status 1: Broker startup failed: admin.rest.listener: "
                          rf"http://127.0.0.1:{ports['broker-3']['admin']}: .*Address already in use")
            run.wait_line(r"^  the others keep running; `bin/twisted-kafka-cluster restart 3 --data-dir ")
            run.wait_line(r"^broker-1 \(broker 1\) started: PLAINTEXT=")
            run.wait_line(r"^broker-2 \(broker 2\) started: PLAINTEXT=")
        status = run.status()
        assert status["broker-3"].startswith("exited with status 1: Broker startup failed: admin.rest.listener")
        running = {name: pid_of(status[name]) for name in ("zookeeper", "broker-1", "broker-2")}
        admin = AdminClient({"bootstrap.servers": f"{bootstrap[1]},{bootstrap[3]}"})
        wait_until(lambda: sorted(metadata().brokers) == [1, 2], 30, what="brokers 1 and 2 in the metadata")

        restarted = run.command("restart", "3")
        assert restarted.returncode == 0, restarted
        assert re.search(r"^broker-3 \(broker 3\) started: PLAINTEXT=", restarted.stdout, re.M), restarted.stdout

        # All three serve a topic with three replicas.
        wait_until(lambda: sorted(metadata().brokers) == [1, 2, 3], 30, what="brokers 1, 2, 3 in the metadata")
        admin.create_topics([NewTopic("demo", 3, 3)], operation_timeout=30)["demo"].result(40)

        def in_sync(expected_isr):
            topic = metadata("demo").topics["demo"]
            return topic.error is None and len(topic.partitions) == 3 and all(
                sorted(p.isrs) == expected_isr and p.leader in expected_isr for p in topic.partitions.values())

        wait_until(lambda: in_sync([1, 2, 3]), 30, what="every partition of demo in sync on brokers 1, 2, 3")
        first = [b"before-%d" % i for i in range(30)]
        produce(bootstrap[1], "demo", first, 3)
        assert sorted(consume(bootstrap[3], "demo", 3, 30)) == sorted(first)

        # kill -9 of broker 2: reported; the others keep running and take over its partitions.
        status = run.status()
        assert {name: pid_of(status[name]) for name in running} == running
        os.kill(pid_of(status["broker-2"]), signal.SIGKILL)
        run.wait_line(r"^broker-2 was killed by SIGKILL$")
        run.wait_line(r"^  the others keep running; `bin/twisted-kafka-cluster restart 2 --data-dir ")
        wait_until(lambda: in_sync([1, 3]), 60, what="broker 2's partitions led by brokers 1 and 3")
        status = run.status()
        assert {name: pid_of(status[name]) for name in ("zookeeper", "broker-1")} == {
            name: running[name] for name in ("zookeeper", "broker-1")}
        assert status["broker-2"] == "was killed by SIGKILL" and status["broker-3"].startswith("running")
        second = [b"during-%d" % i for i in range(30)]
        produce(bootstrap[1], "demo", second, 3)

        restarted = run.command("restart", "2")
        assert restarted.returncode == 0, restarted
        wait_until(lambda: in_sync([1, 2, 3]), 60, what="broker 2 back in every ISR of demo")
        assert sorted(consume(bootstrap[1], "demo", 3, 60)) == sorted(first + second)

        # Ctrl-C: the brokers one at a time, the controller last, then ZooKeeper; exit 0.
        controller = metadata().controller_id
        pids = set(map(pid_of, run.status().values()))
        began = time.monotonic()
        run.process.send_signal(signal.SIGINT)
        status_code = run.process.wait(STOP_BOUND_SECONDS)
        elapsed = time.monotonic() - began
        run.reader.join(10)
        assert status_code == 0, run.output()
        assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
        output = run.output()
        assert f"stopping the brokers one at a time, the controller (broker {controller}) last" in output
        stopped = re.findall(r"^stopping (\S+) \.\.\.$", output, re.M)
        assert stopped[-2:] == [f"broker-{controller}", "zookeeper"], stopped
        assert sorted(stopped) == ["broker-1", "broker-2", "broker-3", "zookeeper"], stopped
        for name in stopped[:2]:
            assert re.search(rf"^{name} stopped in \S+ s \(exit status 0, controlled shutdown succeeded\)$",
                             output, re.M), output
            assert "Controlled shutdown succeeded" in (tmp_path / "d" / f"{name}.log").read_text()
        assert re.search(rf"^broker-{controller} stopped in \S+ s \(exit status 0, ", output, re.M), output
        assert output.endswith("cluster stopped"), output
        print(f"Ctrl-C stopped the cluster in {elapsed:.1f} s:\n{output}")
    except BaseException:
        if run is not None:
            print(run.output())
        raise
    finally:
        if run is not None:
            run.kill_leftovers()


@pytest.mark.parametrize("words", [["restart", "9"], ["status"]])
def test_commands_without_a_running_cluster_say_so(tmp_path, words):
    done = subprocess.run([str(SCRIPT), *words, "--data-dir", str(tmp_path)], cwd=REPO_ROOT, env=user_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"no cluster supervisor answers on {tmp_path}/supervisor.sock" in done.stderr
