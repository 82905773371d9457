"""Group members as processes, watched from the test: assignments, committed messages, exits.

``Member`` starts ``support/group_member.py`` with one client
library and reads its event lines in a thread.  ``Group`` is a set of them
with the checks the tests make:

* ``wait_settled()`` -- every live member has partitions, and together they
  hold every partition of the topic exactly once (the rebalance is over);
* ``wait_consumed(n)`` -- the members together reported ``n`` committed
  messages;
* ``assert_exactly_once(expected)`` -- every (partition, offset) produced was
  reported once, none twice.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading

from confluent_kafka import Producer

from support.broker_process import REPO_ROOT
from support.wait import WaitTimeout, wait_until

PYTHON = sys.executable


class Member:
    def __init__(self, client: str, bootstrap: str, group: str, topic: str, *, name: str,
                 assignor: str | None = None, session_ms: int = 6000, instance_id: str | None = None,
                 extra: tuple[str, ...] = ()):
        self.client = client
        self.name = name
        cmd = [PYTHON, "-u", "-m", "support.group_member", "--client", client, "--bootstrap", bootstrap,
               "--group", group, "--topic", topic, "--name", name, "--session-ms", str(session_ms), *extra]
        if assignor:
            cmd += ["--assignor", assignor]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        self.process = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                                        text=True)
        self.assignment: tuple[int, ...] | None = None
        self.messages: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self.lines: list[str] = []
        self.events: list[tuple[str, float, str]] = []       # (kind, monotonic time, rest)
        self.progress = 0
        self.ready = threading.Event()
        self.closed = threading.Event()
        self.count: int | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._err_reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            kind, _, rest = line.partition(" ")
            if kind == "MSG":
                p, o = rest.split()
                self.messages.append((int(p), int(o)))
                continue
            at, _, rest = rest.partition(" ")
            self.events.append((kind, float(at), rest))
            if kind == "ASSIGN":
                self.assignment = tuple(int(p) for p in rest.split(",") if p)
            elif kind == "READY":
                self.ready.set()
            elif kind == "ERR":
                self.errors.append(rest)
            elif kind == "PROGRESS":
                self.progress = int(rest)
            elif kind == "CLOSED":
                self.closed.set()
            elif kind == "COUNT":
                self.count = int(rest.split()[0])

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_tail.append(line.rstrip("\n"))

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def go(self) -> None:
        """Let a member started with ``--hold`` consume."""
        assert self.process.stdin is not None
        self.process.stdin.write("GO\n")
        self.process.stdin.flush()

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM: the member closes its consumer (it leaves the group) and exits."""
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        """SIGKILL: the member vanishes without leaving; its session has to expire."""
        if self.alive:
            self.process.kill()
        self.process.wait(10)
        self._reader.join(5)

    def event_time(self, kind: str, after: float = 0.0) -> float | None:
        """When the first ``kind`` event at or after ``after`` happened (None: not yet)."""
        for k, at, _ in list(self.events):
            if k == kind and at >= after:
                return at
        return None

    def describe(self) -> str:
        return (f"{self.name} ({self.client}) alive={self.alive} assignment={self.assignment} "
                f"messages={len(self.messages)} errors={self.errors[-3:]} stderr={list(self.stderr_tail)[-8:]}")


def wait_for(condition, timeout: float, what: str, describe=lambda: "") -> None:
    try:
        wait_until(condition, timeout=timeout, what=what, interval=0.05)
    except WaitTimeout as timeout_error:
        raise AssertionError(f"{timeout_error}\n{describe()}") from None


class Group:
    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int):
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.partitions = partitions
        self.members: list[Member] = []
        self.produced = 0

    def add(self, client: str, **kwargs) -> Member:
        member = Member(client, self.bootstrap, self.group, self.topic,
                        name=kwargs.pop("name", f"{client}-{len(self.members)}"), **kwargs)
        self.members.append(member)
        return member

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if m.alive]

    def event_time(self, kind: str, after: float = 0.0) -> float | None:
        """When the first ``kind`` event at or after ``after`` happened (None: not yet)."""
        for k, at, _ in list(self.events):
            if k == kind and at >= after:
                return at
        return None

    def describe(self) -> str:
        return "\n".join(m.describe() for m in self.members)

    def settled(self) -> bool:
        """Every partition held once and the shares balanced (within one partition): the target
        assignment reached, not a step on the way (a consumer-protocol member gives partitions up one
        heartbeat at a time, and every partition is held once at each step)."""
        live = self.live
        if not live or any(not m.assignment for m in live):
            return False
        held = [p for m in live for p in m.assignment or ()]
        sizes = [len(m.assignment or ()) for m in live]
        return sorted(held) == list(range(self.partitions)) and max(sizes) - min(sizes) <= 1

    def wait_settled(self, timeout: float = 30) -> dict[str, tuple[int, ...]]:
        """Every partition held by exactly one live member, every live member holds one, the shares
        balanced."""
        wait_for(self.settled, timeout, "the group to settle", self.describe)
        return {m.name: m.assignment for m in self.live}

    def consumed(self) -> int:
        return sum(len(m.messages) for m in self.members)

    def wait_consumed(self, n: int, timeout: float = 30) -> None:
        wait_for(lambda: self.consumed() >= n, timeout, f"{n} committed messages (have {self.consumed()})",
                 self.describe)

    def produce(self, n: int) -> None:
        """``n`` more messages, spread over every partition."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for i in range(n):
            producer.produce(self.topic, value=b"m%d" % (self.produced + i), partition=i % self.partitions)
        assert producer.flush(20) == 0
        self.produced += n

    def assert_exactly_once(self, end_offsets: dict[int, int]) -> None:
        seen = collections.Counter(pm for m in self.members for pm in m.messages)
        duplicates = {pm: c for pm, c in seen.items() if c > 1}
        assert not duplicates, f"consumed more than once: {sorted(duplicates)[:20]}"
        expected = {(p, o) for p, end in end_offsets.items() for o in range(end)}
        missing = expected - set(seen)
        assert not missing, f"never consumed: {sorted(missing)[:20]}"
        assert set(seen) == expected

    def stop_all(self) -> None:
        for m in self.members:
            if m.alive:
                try:
                    m.stop()
                except subprocess.TimeoutExpired:
                    m.kill()
