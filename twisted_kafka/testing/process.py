"""A broker in a child process: the one way a broker is started for tests.

``EmbeddedBroker`` (this package's public face) and the project's own test
harness (``support/broker_process.py``) both start brokers through
``BrokerProcess``:

    broker = BrokerProcess(parent_dir, {"num.io.threads": "2"}).start()
    broker.bootstrap            # "127.0.0.1:<port the broker bound>"
    broker.stop()               # SIGTERM: a clean shutdown; returns the exit status (0)

The broker runs as ``python -m twisted_kafka.cli CONFIG --override k=v ...``
(``twistd -n kafka``, the way every broker starts) with the interpreter
running this code, so it needs the installed package and nothing of a
checkout.  The configuration file is written to the broker's own directory
(``<parent_dir>/broker``, ``broker-1``, ... so several brokers can share a
parent): a base configuration -- ``base_config``, a mapping or a
``.properties`` file -- with the keys this class manages set below it:
listeners on loopback port 0 (PLAINTEXT for the data plane, CONTROLLER for
the control plane unless ``control_plane=False``), ``log.dirs`` inside the
broker's directory and the admin REST endpoint on loopback port 0.
``overrides`` go on the command line as ``--override``.

Ports: the kernel picks them.  Every listener binds port 0, and the broker
reports what it bound in the line it logs once it is ready (``Broker <id> of
cluster <cid> started in ...; listeners: NAME=host:port(plane), ...``); that
line is read here, so no port is ever chosen here and handed to the broker
later (another process could take it in between).  After the first start,
``ports`` maps each listener to its port (``port(name)``, ``data_port``,
``control_port``, ``bootstrap``), and a restart asks for the same ports
again, explicitly: clients reconnect where they were.  An override value names
a listener's port with ``{port:NAME}`` (0 on the first start, the port
listener NAME bound on later ones), e.g.

    {"listeners": "CLIENT://127.0.0.1:{port:CLIENT},INTERNAL://127.0.0.1:{port:INTERNAL}",
     "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
     "inter.broker.listener.name": "INTERNAL", "control.plane.listener.name": ""}

``admin_url`` is the admin REST endpoint's address as the broker logged it.
``ports={"PLAINTEXT": 12345}`` asks for given ports from the first start.
When ``listeners`` is overridden and ``advertised.listeners`` is not, the
advertised listeners follow ``listeners``.  ``data_port`` is the PLAINTEXT
listener's, else the first listener that is not the control plane's.

A broker that cannot start says why in one line (``Broker startup failed:
<key>: <value>: <reason>``, twisted_kafka/server/startup.py) and exits 1:
``start()`` raises ``BrokerStartupError`` with that line as ``reason`` as soon
as the line appears or the process exits -- it does not wait for a timeout.

Everything the broker prints (stdout and stderr) goes to ``broker.log`` in
its directory: ``log_text()`` reads it, ``wait_for_log()`` waits for a line.
The broker runs in its own session, so a Ctrl-C meant for the parent does not
reach it first; one still running when the parent process exits is killed
then.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

__all__ = ["BrokerProcess", "BrokerStartupError", "NotStarted", "answers_api_versions", "bound_listeners",
           "ADMIN_REST", "LAUNCHER", "STARTUP_FAILURE_EXIT_GRACE", "FAILURE_PREFIX"]

#: How a broker is started: the installed package's front to ``twistd -n kafka``.
LAUNCHER: tuple[str, ...] = (sys.executable, "-m", "twisted_kafka.cli")

#: Seconds a broker that logged "Broker startup failed" gets to exit by itself.
STARTUP_FAILURE_EXIT_GRACE = 5.0

#: The start of the one line a broker that cannot start prints (twisted_kafka/server/startup.py).
FAILURE_PREFIX = "Broker startup failed: "

#: Seconds between two looks at the broker's output while waiting for a line.
POLL_INTERVAL = 0.005

# Keys this class writes itself (a base configuration's own values for them are dropped).
_MANAGED_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map",
                 "inter.broker.listener.name", "control.plane.listener.name", "log.dirs", "admin.rest.listener")
#: The base configuration when none is given: broker id 0 (as etc/server.properties), Kafka's defaults otherwise.
DEFAULT_BASE_CONFIG: Mapping[str, str] = {"broker.id": "0"}
_PORT_PLACEHOLDER = re.compile(r"\{port:([A-Za-z0-9_.-]+)\}")
_LISTENER_NAME = re.compile(r"^\s*([A-Za-z0-9_.-]+)://")
# The broker's ready line (KafkaServer) and one "NAME=host:port(plane)" entry of it.
_STARTED = re.compile(r"Broker \S+ of cluster \S+ started in \S+; listeners: (?P<listeners>[^\n]*)")
_BOUND = re.compile(r"([A-Za-z0-9_.-]+)=(\S+):(\d+)\((\w+)\)")
# The admin REST endpoint's line (twisted_kafka.admin.service), with the port it bound.
_ADMIN = re.compile(r"Admin REST endpoint listening on (?P<url>https?://\S+):(?P<port>\d+)")
#: The placeholder name of the admin endpoint's port ({port:ADMIN_REST}).
ADMIN_REST = "ADMIN_REST"
# ApiVersions v0, correlation id 0x7eadbeef, client id "broker-process".
_PROBE = (struct.pack(">hhih", 18, 0, 0x7EADBEEF, 14) + b"broker-process")
_PROBE = struct.pack(">i", len(_PROBE)) + _PROBE

T = TypeVar("T")

_LIVE: weakref.WeakSet[BrokerProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.kill()


def answers_api_versions(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a Kafka broker on ``port`` answers an ApiVersions v0 request (readiness probe)."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            sock.sendall(_PROBE)
            data = b""
            while len(data) < 8:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                data += chunk
            return struct.unpack(">i", data[4:8])[0] == 0x7EADBEEF
    except OSError:
        return False


def bound_listeners(started_line: str) -> dict[str, int]:
    """``{listener: port}`` from the broker's "started ...; listeners: ..." line."""
    match = _STARTED.search(started_line)
    if match is None:
        raise ValueError(f"not a broker started line: {started_line!r}")
    return {name.upper(): int(port) for name, _host, port, _plane in _BOUND.findall(match["listeners"])}


def _poll(predicate: Callable[[], T | None], timeout: float) -> T | None:
    """``predicate()``'s first true value within ``timeout`` seconds, else None (exceptions propagate)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(POLL_INTERVAL)     # between two looks at the broker's output


class BrokerStartupError(RuntimeError):
    """The broker did not start: it reported why, exited, or never said it was ready.

    ``reason`` is one line -- the broker's own ``Broker startup failed: ...``
    line when it printed one -- and ``log`` everything it printed.
    """

    def __init__(self, reason: str, returncode: int | None, log: str):
        super().__init__(f"{reason}\n--- broker output ---\n{log[-6000:]}")
        self.reason = reason
        self.returncode = returncode
        self.log = log


class NotStarted(RuntimeError):
    """A port was asked for before the broker reported the ports it bound."""


def _next_dir(parent: Path) -> Path:
    for n in range(1000):
        path = parent / ("broker" if n == 0 else f"broker-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"too many brokers under {parent}")


def _properties(lines: Sequence[str]) -> dict[str, str]:
    """``key=value`` / ``key: value`` lines of a properties file (comments skipped; no continuations)."""
    values = {}
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        parts = re.split(r"\s*[=:]\s*", stripped, maxsplit=1)
        if len(parts) == 2:
            values[parts[0]] = parts[1]
    return values


class BrokerProcess:
    #: Seconds ``start()`` waits for the started line by default.
    startup_timeout = 30.0

    def __init__(self, parent_dir, overrides: Mapping[str, object] | None = None, *, control_plane: bool = True,
                 ports: Mapping[str, int] | None = None,
                 base_config: Mapping[str, object] | str | os.PathLike | None = None,
                 launcher: Sequence[str] | None = None, env: Mapping[str, str] | None = None):
        self.dir = _next_dir(Path(parent_dir))
        self.config_path = str(self.dir / "server.properties")
        self.log_path = str(self.dir / "broker.log")
        self.log_dirs = [str(self.dir / "kafka-logs")]
        self.control_plane = control_plane
        if base_config is None:
            base_config = DEFAULT_BASE_CONFIG
        #: The base configuration: a ``.properties`` file (its lines kept, managed keys commented out) or a mapping.
        self.base_config: Path | dict[str, str] = (
            {str(k): str(v) for k, v in base_config.items()} if isinstance(base_config, Mapping)
            else Path(base_config))
        #: The command that starts a broker; the config file and --override pairs follow it.
        self.launcher: list[str] = list(launcher or LAUNCHER)
        #: The broker's environment (None: this process's).
        self.env: dict[str, str] | None = dict(env) if env is not None else None
        #: The overrides as given ({port:NAME} placeholders kept): rendered at every start, so a
        #: caller may change one between a stop and the next start.
        self.overrides: dict[str, str] = {k: str(v) for k, v in (overrides or {}).items()}
        # The port each listener asks for at the next start: 0 (the kernel picks) until the
        # broker has reported what it bound, then that port.
        self._requested: dict[str, int] = {name.upper(): int(port) for name, port in (ports or {}).items()}
        #: ``{listener: port}`` as the broker reported it at its latest successful start.
        self.ports: dict[str, int] = {}
        self.listener_names: list[str] = self._listener_names()
        control = self.effective("control.plane.listener.name").upper()
        self.control_listener: str | None = control if control in self.listener_names else None
        data = [name for name in self.listener_names if name != self.control_listener]
        if not data:
            raise ValueError("no data-plane listener in the configuration")
        self.data_listener = "PLAINTEXT" if "PLAINTEXT" in data else data[0]
        self.process: subprocess.Popen | None = None
        #: The admin REST endpoint's base URL (``http://127.0.0.1:<port>``) once started, if it runs.
        self.admin_url: str | None = None
        self.returncode: int | None = None
        self.starts = 0
        self._log_offset_at_start = 0
        self._write_config()

    # -- configuration --------------------------------------------------------------

    def _render(self, value: str) -> str:
        return _PORT_PLACEHOLDER.sub(lambda match: str(self._requested.get(match[1].upper(), 0)), value)

    def _managed_values(self) -> dict[str, str]:
        plaintext = "PLAINTEXT://127.0.0.1:{port:PLAINTEXT}"
        # The admin endpoint on loopback port 0 too (its default, 9644, would collide between brokers).
        admin = {"admin.rest.listener": f"http://127.0.0.1:{{port:{ADMIN_REST}}}"}
        if self.control_plane:
            listeners = f"{plaintext},CONTROLLER://127.0.0.1:{{port:CONTROLLER}}"
            return {"listeners": listeners, "advertised.listeners": listeners,
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name": "PLAINTEXT", "control.plane.listener.name": "CONTROLLER",
                    "log.dirs": ",".join(self.log_dirs), **admin}
        return {"listeners": plaintext, "advertised.listeners": plaintext,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT", "log.dirs": ",".join(self.log_dirs), **admin}

    def _rendered_overrides(self) -> dict[str, str]:
        rendered = {key: self._render(value) for key, value in self.overrides.items()}
        if "listeners" in rendered and "advertised.listeners" not in rendered:
            rendered["advertised.listeners"] = rendered["listeners"]
        return rendered

    def _base_lines(self) -> list[str]:
        if isinstance(self.base_config, Path):
            return self.base_config.read_text(encoding="utf-8").splitlines()
        return [f"{key}={value}" for key, value in self.base_config.items()]

    def write_config(self) -> list[str]:
        """Write the configuration file as a start does; returns the plugin's arguments
        (``--config FILE --override ...``) for a test that runs twistd itself."""
        self._write_config()
        return ["--config", *self.command[len(self.launcher):]]

    def _write_config(self) -> None:
        kept = []
        for line in self._base_lines():
            key = re.split(r"\s*[=:]\s*|\s+", line.strip(), maxsplit=1)[0]
            if key in _MANAGED_KEYS:
                kept.append(f"# (set below by twisted_kafka.testing) {line}")
            else:
                kept.append(line)
        kept.append("")
        kept.append("############################# Set for this broker #############################")
        kept.extend(f"{key}={self._render(value)}" for key, value in self._managed_values().items())
        Path(self.config_path).write_text("\n".join(kept) + "\n", encoding="utf-8")

    def effective(self, key: str) -> str:
        """The value of ``key`` as the broker will see it at its next start (override, else the
        managed or base value; '' if unset)."""
        overrides = self._rendered_overrides()
        if key in overrides:
            return overrides[key]
        managed = self._managed_values()
        if key in managed:
            return self._render(managed[key])
        return _properties(self._base_lines()).get(key, "")

    def _listener_names(self) -> list[str]:
        names = []
        for entry in self.effective("listeners").split(","):
            match = _LISTENER_NAME.match(entry)
            if match:
                names.append(match[1].upper())
        return names

    # -- ports (as the broker reported them) ----------------------------------------

    def port(self, listener_name: str) -> int:
        """The port a listener (by name, any case) bound, as the broker reported it."""
        if not self.ports:
            raise NotStarted(f"{self!r} has not reported its ports yet: start() it first")
        return self.ports[listener_name.upper()]

    @property
    def listener_ports(self) -> dict[str, int]:
        return dict(self.ports)

    @property
    def data_port(self) -> int:
        return self.port(self.data_listener)

    @property
    def control_port(self) -> int | None:
        return self.port(self.control_listener) if self.control_listener else None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.data_port}"

    @property
    def command(self) -> list[str]:
        args = [*self.launcher, self.config_path]
        for key, value in self._rendered_overrides().items():
            args += ["--override", f"{key}={value}"]
        return args

    # -- lifecycle ------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None and self.running else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self) -> BrokerProcess:
        """Start the process without waiting for it to be ready."""
        if self.running:
            raise RuntimeError("broker already running")
        self._write_config()
        with open(self.log_path, "ab") as log_file:        # the child keeps its own descriptor
            self._log_offset_at_start = log_file.tell()
            self.returncode = None
            self.process = subprocess.Popen(self.command, stdout=log_file, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=str(self.dir), env=self.env,
                                            start_new_session=True)
        self.starts += 1
        _LIVE.add(self)
        return self

    def start(self, timeout: float | None = None) -> BrokerProcess:
        """Spawn the broker and wait until it is ready; a restart asks for the ports of the previous start.

        Ready is the broker's own word: it logs the started line (with the
        ports it bound) once every listener accepts.  No connection is opened
        here, so when the caller goes on, the only connection the broker
        holds is its controller's, to its own control plane (or data plane
        without one) -- connection limits can be tested exactly.
        """
        self.spawn()
        return self.wait_started(timeout)

    def wait_started(self, timeout: float | None = None) -> BrokerProcess:
        """Wait for a spawned broker's started line (several brokers spawned together start in parallel)."""
        timeout = self.startup_timeout if timeout is None else timeout
        line = _poll(self._started_line, timeout)
        if line is None:
            self.kill()
            raise BrokerStartupError(f"the broker did not report being started within {timeout}s",
                                     self.returncode, self.log_text())
        self.ports = bound_listeners(line)
        self._requested.update(self.ports)
        admin = _ADMIN.search(self.log_text(since_start=True))
        self.admin_url = f"{admin['url']}:{admin['port']}" if admin else None
        if admin:
            self._requested[ADMIN_REST] = int(admin["port"])
        return self

    def _started_line(self) -> str | None:
        """The started line of the current run; raises BrokerStartupError if the run failed instead."""
        assert self.process is not None
        code = self.process.poll()
        text = self.log_text(since_start=True)
        match = _STARTED.search(text)
        if match is not None:
            return match[0]
        if code is not None:
            self._reap(code)
            raise BrokerStartupError(self.failure_line() or f"the broker exited with status {code} during startup",
                                     code, self.log_text())
        if FAILURE_PREFIX in text:
            # It exits by itself with status 1; if it hangs, it is killed (the status is then -9,
            # which tells a hang from a proper exit).
            try:
                self._reap(self.process.wait(STARTUP_FAILURE_EXIT_GRACE))
            except subprocess.TimeoutExpired:
                self.kill()
            raise BrokerStartupError(self.failure_line() or "the broker reported a startup failure",
                                     self.returncode, self.log_text())
        return None

    def failure_line(self) -> str | None:
        """The current run's ``Broker startup failed: ...`` line (without its log prefix), if it printed one."""
        for line in self.log_text(since_start=True).splitlines():
            position = line.find(FAILURE_PREFIX)
            if position >= 0:
                return line[position:].strip()
        return None

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (a clean shutdown); returns the exit status."""
        if self.process is None:
            raise RuntimeError("broker was never started")
        if not self.running:
            return self._reap(self.process.wait())
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f"broker did not exit within {timeout}s of SIGTERM\n{self.log_text()[-4000:]}") from None
        return self._reap(code)

    def kill(self) -> None:
        """SIGKILL (a crash), and wait for the process to be gone."""
        if self.process is None:
            return
        if self.running:
            self.process.kill()
        self._reap(self.process.wait())

    def restart(self, timeout: float = 30) -> BrokerProcess:
        """Stop (cleanly) and start again: same ports, same log dirs."""
        self.stop(timeout)
        return self.start(timeout)

    def _reap(self, code: int) -> int:
        self.returncode = code
        _LIVE.discard(self)
        return code

    def __enter__(self) -> BrokerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.running:
            self.stop()

    # -- output ---------------------------------------------------------------------

    def log_text(self, *, since_start: bool = False) -> str:
        """Everything the broker printed (all runs; ``since_start``: the current run only)."""
        try:
            with open(self.log_path, "rb") as fh:
                if since_start:
                    fh.seek(self._log_offset_at_start)
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_mark(self) -> int:
        """A position in the log; pass it as ``after=`` to ignore what was printed before."""
        return len(self.log_text())

    def wait_for_log(self, pattern: str, timeout: float = 10, *, after: int = 0) -> str:
        """Wait for a line matching the regex ``pattern``; returns that line."""
        regex = re.compile(pattern)

        def matching_line() -> str | None:
            text = self.log_text()[after:]
            match = regex.search(text)
            if match is None:
                return None
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            return text[start:end if end >= 0 else len(text)]

        line = _poll(matching_line, timeout)
        if line is None:
            raise AssertionError(f"no line matching {pattern!r} in the broker output within {timeout}s\n"
                                 f"--- broker output ---\n{self.log_text()[after:][-4000:]}")
        return line

    def __repr__(self) -> str:
        where = self.bootstrap if self.ports else "(no ports yet)"
        state = f"pid {self.pid}" if self.running else f"exit {self.returncode}"
        return f"<BrokerProcess {where} {state} dir={self.dir}>"
