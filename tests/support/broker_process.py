"""A twisted_kafka broker in a child process, started the README way.

Integration tests run the broker exactly as an operator does —
``bin/twisted-kafka-server-start CONFIG --override key=value ...`` — and talk
to it over loopback sockets with real clients.

    broker = BrokerProcess(tmp_path, {"num.io.threads": "2"}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ...
    assert broker.stop() == 0

The configuration file is ``etc/server.properties`` with the listeners moved
to loopback port 0 (PLAINTEXT for the data plane, CONTROLLER for the control
plane unless ``control_plane=False``) and ``log.dirs`` under ``tmp_path``.
``overrides`` go on the command line as ``--override``.

Ports: the kernel picks them.  Every listener binds port 0, and the broker
reports what it bound in the line it logs once it is ready (``Broker <id> of
cluster <cid> started in ...; listeners: NAME=host:port(plane), ...``); the
harness reads that line, so no port is ever chosen here and handed to the
broker later (another process could take it in between).  After the first
start, ``ports`` maps each listener to its port (``port(name)``,
``data_port``, ``control_port``, ``bootstrap``), and a restart asks for the
same ports again, explicitly: clients reconnect where they were.  An override
value names a listener's port with ``{port:NAME}`` (0 on the first start, the
port listener NAME bound on later ones), e.g.

    {"listeners": "CLIENT://127.0.0.1:{port:CLIENT},INTERNAL://127.0.0.1:{port:INTERNAL}",
     "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
     "inter.broker.listener.name": "INTERNAL", "control.plane.listener.name": ""}

The admin REST endpoint (``admin.rest.listener``) binds loopback port 0 as
well; ``admin_url`` is its address as the broker logged it, and a restart
asks for the same port again.

``ports={"PLAINTEXT": 12345}`` asks for given ports from the first start (a
test checking what happens when a port is taken passes one it holds itself).
When ``listeners`` is overridden and ``advertised.listeners`` is not, the
advertised listeners follow ``listeners`` (port 0 is advertised as the port
bound, as Kafka does).  ``data_port`` is the PLAINTEXT listener's, else the
first listener that is not the control plane's.

Everything the broker prints (stdout and stderr) goes to ``broker.log`` in the
broker's directory: ``log_text()`` reads it, ``wait_for_log()`` waits for a
line.

A broker still running when the Python process exits (a script that raised
before ``stop()``, an interrupted test run) is killed then, so none is left
behind.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import signal
import socket
import struct
import subprocess
import weakref
from pathlib import Path

from tests.support.wait import WaitTimeout, wait_until

__all__ = ["BrokerProcess", "BrokerExited", "REPO_ROOT", "answers_api_versions"]

REPO_ROOT = Path(__file__).resolve().parents[2]
START_SCRIPT = REPO_ROOT / "bin" / "twisted-kafka-server-start"
BASE_CONFIG = REPO_ROOT / "etc" / "server.properties"

#: Seconds a broker that logged "Broker startup failed" gets to exit by itself.
STARTUP_FAILURE_EXIT_GRACE = 5.0

# Keys this harness writes itself (the rest of etc/server.properties is kept).
_MANAGED_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map",
                 "inter.broker.listener.name", "control.plane.listener.name", "log.dirs", "admin.rest.listener")
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


# Brokers run in their own session (a Ctrl-C meant for pytest must not reach them
# first), so nothing would stop them if this process ended without stopping them
# (a script that raised, an interrupted test run): kill what is left at exit.
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


class BrokerExited(RuntimeError):
    """The broker process exited (or reported a startup failure) before it was ready."""

    def __init__(self, message: str, returncode: int | None, log: str):
        super().__init__(f"{message}\n--- broker output ---\n{log[-6000:]}")
        self.returncode = returncode
        self.log = log


class NotStarted(RuntimeError):
    """A port was asked for before the broker reported the ports it bound."""


def _next_dir(tmp_path: Path) -> Path:
    for n in range(1000):
        path = tmp_path / ("broker" if n == 0 else f"broker-{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"too many brokers under {tmp_path}")


class BrokerProcess:
    def __init__(self, tmp_path, overrides: dict[str, str] | None = None, *, control_plane: bool = True,
                 ports: dict[str, int] | None = None):
        self.dir = _next_dir(Path(tmp_path))
        self.config_path = str(self.dir / "server.properties")
        self.log_path = str(self.dir / "broker.log")
        self.log_dirs = [str(self.dir / "kafka-logs")]
        self.control_plane = control_plane
        #: The overrides as given ({port:NAME} placeholders kept): rendered at every start, so a
        #: test may change one between a stop and the next start.
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

    def _base_values(self) -> dict[str, str]:
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

    def write_config(self) -> list[str]:
        """Write the configuration file as a start does; returns the plugin's arguments
        (``--config FILE --override ...``) for a test that runs twistd itself."""
        self._write_config()
        return ["--config", *self.command[1:]]

    def _write_config(self) -> None:
        kept = []
        for line in BASE_CONFIG.read_text(encoding="utf-8").splitlines():
            key = re.split(r"\s*[=:]\s*|\s+", line.strip(), maxsplit=1)[0]
            if key in _MANAGED_KEYS:
                kept.append(f"# (set below by tests/support/broker_process.py) {line}")
            else:
                kept.append(line)
        kept.append("")
        kept.append("############################# Test harness #############################")
        kept.extend(f"{key}={self._render(value)}" for key, value in self._base_values().items())
        Path(self.config_path).write_text("\n".join(kept) + "\n", encoding="utf-8")

    def effective(self, key: str) -> str:
        """The value of ``key`` as the broker will see it at its next start (override, else the
        harness/base file; '' if unset)."""
        overrides = self._rendered_overrides()
        if key in overrides:
            return overrides[key]
        base = self._base_values()
        if key in base:
            return self._render(base[key])
        for line in BASE_CONFIG.read_text(encoding="utf-8").splitlines():
            parts = re.split(r"\s*[=:]\s*", line.strip(), maxsplit=1)
            if len(parts) == 2 and parts[0] == key:
                return parts[1]
        return ""

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
        args = [str(START_SCRIPT), self.config_path]
        for key, value in self._rendered_overrides().items():
            args += ["--override", f"{key}={value}"]
        return args

    # -- lifecycle ------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.running else None

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
                                            stdin=subprocess.DEVNULL, cwd=str(self.dir), start_new_session=True)
        self.starts += 1
        _LIVE.add(self)
        return self

    def start(self, timeout: float = 30) -> BrokerProcess:
        """Spawn the broker and wait until it is ready; a restart asks for the ports of the previous start.

        Ready is the broker's own word: it logs the started line (with the
        ports it bound) once every listener accepts.  The harness opens no
        connection of its own, so when a test begins, the only connection
        the broker holds is its controller's, to its own control plane (or
        data plane without one) -- connection limits can be tested exactly.
        """
        self.spawn()
        return self.wait_started(timeout)

    def wait_started(self, timeout: float = 30) -> BrokerProcess:
        """Wait for a spawned broker's started line (several brokers spawned together start in parallel)."""
        try:
            line = wait_until(self._started_line, timeout, what="the broker's started line")
        except WaitTimeout:
            self.kill()
            raise BrokerExited(f"broker did not report being started within {timeout}s",
                               self.returncode, self.log_text()) from None
        self.ports = bound_listeners(line)
        self._requested.update(self.ports)
        admin = _ADMIN.search(self.log_text(since_start=True))
        self.admin_url = f"{admin['url']}:{admin['port']}" if admin else None
        if admin:
            self._requested[ADMIN_REST] = int(admin["port"])
        return self

    def _started_line(self) -> str | None:
        """The started line of the current run; raises BrokerExited if the run failed instead."""
        code = self.process.poll()
        text = self.log_text(since_start=True)
        match = _STARTED.search(text)
        if match is not None:
            return match[0]
        if code is not None:
            self._reap(code)
            raise BrokerExited(f"broker exited with status {code} during startup", code, self.log_text())
        if "Broker startup failed" in text:
            # It should exit by itself with a non-zero status; if it hangs, kill it
            # (the status is then -9, which tests can tell from a proper exit).
            try:
                self._reap(self.process.wait(STARTUP_FAILURE_EXIT_GRACE))
            except subprocess.TimeoutExpired:
                self.kill()
            raise BrokerExited("broker reported a startup failure", self.returncode, self.log_text())
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
        if self.running:
            self.process.kill()
        if self.process is not None:
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

        try:
            return wait_until(matching_line, timeout, what=f"a line matching {pattern!r}")
        except WaitTimeout:
            raise AssertionError(f"no line matching {pattern!r} in the broker output within {timeout}s\n"
                                 f"--- broker output ---\n{self.log_text()[after:][-4000:]}") from None

    def __repr__(self) -> str:
        where = self.bootstrap if self.ports else "(no ports yet)"
        state = f"pid {self.pid}" if self.running else f"exit {self.returncode}"
        return f"<BrokerProcess {where} {state} dir={self.dir}>"
