"""A twisted_kafka broker in a child process, started the README way.

Integration tests run the broker exactly as an operator does —
``bin/twisted-kafka-server-start CONFIG --override key=value ...`` — and talk
to it over loopback sockets with real clients.

    broker = BrokerProcess(tmp_path, {"num.io.threads": "2"}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ...
    assert broker.stop() == 0

The configuration file is ``etc/server.properties`` with the listeners moved
to free loopback ports (PLAINTEXT for the data plane, CONTROLLER for the
control plane unless ``control_plane=False``) and ``log.dirs`` under
``tmp_path``.  ``overrides`` go on the command line as ``--override``.  An
override value may ask for a free port with ``{port:NAME}``, which is chosen
once per BrokerProcess and kept across restarts (``broker.ports[NAME]``), e.g.

    {"listeners": "CLIENT://127.0.0.1:{port:CLIENT},INTERNAL://127.0.0.1:{port:INTERNAL}",
     "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
     "inter.broker.listener.name": "INTERNAL", "control.plane.listener.name": ""}

When ``listeners`` is overridden and ``advertised.listeners`` is not, the
advertised listeners follow ``listeners``.  ``data_port`` is then the first
listener that is not the control plane.

Everything the broker prints (stdout and stderr) goes to ``broker.log`` in the
broker's directory: ``log_text()`` reads it, ``wait_for_log()`` polls it.

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
import time
import weakref
from pathlib import Path

__all__ = ["BrokerProcess", "BrokerExited", "free_port", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parents[2]
START_SCRIPT = REPO_ROOT / "bin" / "twisted-kafka-server-start"
BASE_CONFIG = REPO_ROOT / "etc" / "server.properties"

#: Seconds a broker that logged "Broker startup failed" gets to exit by itself.
STARTUP_FAILURE_EXIT_GRACE = 5.0

# Keys this harness writes itself (the rest of etc/server.properties is kept).
_MANAGED_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map",
                 "inter.broker.listener.name", "control.plane.listener.name", "log.dirs")
_PORT_PLACEHOLDER = re.compile(r"\{port:([A-Za-z0-9_.-]+)\}")
_LISTENER = re.compile(r"^\s*([A-Za-z0-9_.-]+)://(\[[^\]]*\]|[^:]*):(\d+)\s*$")
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


class BrokerExited(RuntimeError):
    """The broker process exited (or reported a startup failure) before it was ready."""

    def __init__(self, message: str, returncode: int | None, log: str):
        super().__init__(f"{message}\n--- broker output ---\n{log[-6000:]}")
        self.returncode = returncode
        self.log = log


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


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
    def __init__(self, tmp_path, overrides: dict[str, str] | None = None, *, control_plane: bool = True):
        self.dir = _next_dir(Path(tmp_path))
        self.config_path = str(self.dir / "server.properties")
        self.log_path = str(self.dir / "broker.log")
        self.log_dirs = [str(self.dir / "kafka-logs")]
        self.ports: dict[str, int] = {"PLAINTEXT": free_port()}
        if control_plane:
            self.ports["CONTROLLER"] = free_port()
        self.control_plane = control_plane
        self.overrides: dict[str, str] = {k: self._substitute(str(v)) for k, v in (overrides or {}).items()}
        if "listeners" in self.overrides and "advertised.listeners" not in self.overrides:
            self.overrides["advertised.listeners"] = self.overrides["listeners"]
        self._write_config()
        self.listener_ports: dict[str, int] = self._listener_ports()
        control = self.effective("control.plane.listener.name").upper()
        self.control_listener: str | None = control if control in self.listener_ports else None
        data = [name for name in self.listener_ports if name != self.control_listener]
        if not data:
            raise ValueError("no data-plane listener in the configuration")
        self.data_listener = "PLAINTEXT" if "PLAINTEXT" in data else data[0]
        self.data_port: int = self.listener_ports[self.data_listener]
        self.control_port: int | None = (self.listener_ports.get(self.control_listener) if self.control_listener
                                         else None)
        self.bootstrap = f"127.0.0.1:{self.data_port}"
        self.process: subprocess.Popen | None = None
        self.returncode: int | None = None
        self.starts = 0

    # -- configuration --------------------------------------------------------------

    def _substitute(self, value: str) -> str:
        def port(match: re.Match) -> str:
            name = match[1].upper()
            if name not in self.ports:
                self.ports[name] = free_port()
            return str(self.ports[name])
        return _PORT_PLACEHOLDER.sub(port, value)

    def _base_values(self) -> dict[str, str]:
        plaintext = f"PLAINTEXT://127.0.0.1:{self.ports['PLAINTEXT']}"
        if self.control_plane:
            listeners = f"{plaintext},CONTROLLER://127.0.0.1:{self.ports['CONTROLLER']}"
            return {"listeners": listeners, "advertised.listeners": listeners,
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name": "PLAINTEXT", "control.plane.listener.name": "CONTROLLER",
                    "log.dirs": ",".join(self.log_dirs)}
        return {"listeners": plaintext, "advertised.listeners": plaintext,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT", "log.dirs": ",".join(self.log_dirs)}

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
        kept.extend(f"{key}={value}" for key, value in self._base_values().items())
        Path(self.config_path).write_text("\n".join(kept) + "\n", encoding="utf-8")

    def effective(self, key: str) -> str:
        """The value of ``key`` as the broker will see it (override, else the harness/base file; '' if unset)."""
        if key in self.overrides:
            return self.overrides[key]
        base = self._base_values()
        if key in base:
            return base[key]
        for line in Path(self.config_path).read_text(encoding="utf-8").splitlines():
            parts = re.split(r"\s*[=:]\s*", line.strip(), maxsplit=1)
            if len(parts) == 2 and parts[0] == key:
                return parts[1]
        return ""

    def _listener_ports(self) -> dict[str, int]:
        ports: dict[str, int] = {}
        for entry in self.effective("listeners").split(","):
            match = _LISTENER.match(entry)
            if match:
                ports[match[1].upper()] = int(match[3])
        return ports

    def port(self, listener_name: str) -> int:
        """The port of a listener (by name, any case)."""
        return self.listener_ports[listener_name.upper()]

    @property
    def command(self) -> list[str]:
        args = [str(START_SCRIPT), self.config_path]
        for key, value in self.overrides.items():
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
        with open(self.log_path, "ab") as log_file:        # the child keeps its own descriptor
            self._log_offset_at_start = log_file.tell()
            self.returncode = None
            self.process = subprocess.Popen(self.command, stdout=log_file, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=str(self.dir), start_new_session=True)
        self.starts += 1
        _LIVE.add(self)
        return self

    def start(self, timeout: float = 30) -> BrokerProcess:
        """Spawn the broker and wait until its data port answers ApiVersions."""
        self.spawn()
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                self._reap(code)
                raise BrokerExited(f"broker exited with status {code} during startup", code, self.log_text())
            if "Broker startup failed" in self.log_text(since_start=True):
                # It should exit by itself with a non-zero status; if it hangs, kill it
                # (the status is then -9, which tests can tell from a proper exit).
                try:
                    self._reap(self.process.wait(STARTUP_FAILURE_EXIT_GRACE))
                except subprocess.TimeoutExpired:
                    self.kill()
                raise BrokerExited("broker reported a startup failure", self.returncode, self.log_text())
            if self._probe():
                return self
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerExited(f"broker did not answer ApiVersions on {self.bootstrap} within {timeout}s",
                                   self.returncode, self.log_text())
            time.sleep(0.05)

    def _probe(self) -> bool:
        return answers_api_versions(self.data_port)

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
                    fh.seek(getattr(self, "_log_offset_at_start", 0))
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_mark(self) -> int:
        """A position in the log; pass it as ``after=`` to ignore what was printed before."""
        return len(self.log_text())

    def wait_for_log(self, pattern: str, timeout: float = 10, *, after: int = 0) -> str:
        """Wait for a line matching the regex ``pattern``; returns that line."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            text = self.log_text()[after:]
            match = regex.search(text)
            if match:
                start = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.end())
                return text[start:end if end >= 0 else len(text)]
            if time.monotonic() > deadline:
                raise AssertionError(f"no line matching {pattern!r} in the broker output within {timeout}s\n"
                                     f"--- broker output ---\n{text[-4000:]}")
            time.sleep(0.05)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else f"exit {self.returncode}"
        return f"<BrokerProcess {self.bootstrap} {state} dir={self.dir}>"
