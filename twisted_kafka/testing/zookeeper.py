"""A real ZooKeeper in a child process, for ``EmbeddedCluster`` and the project's cluster tests.

Debian's ``zookeeper`` package (3.8) runs under Java 17 with a ``zoo.cfg``
generated in its directory (data directory there too, the admin server off).
Its client port is chosen by the kernel: ZooKeeper's own
``ZooKeeperServerMain`` cannot bind port 0 (``clientPort=0`` means "no client
port"), so ``ZooKeeperOnLoopback.java`` (shipped beside this module) -- run by
Java's single-file source launcher -- reads the same ``zoo.cfg`` and binds
``127.0.0.1:0``; the port is then read from the process's LISTEN socket
(Linux ``/proc``).  No port is ever chosen here and handed over later.

    zk = ZooKeeperServer(tmp_path).start()
    broker overrides: {"zookeeper.connect": zk.connect_string("/test-a")}
    with zk.client() as client: client.get_children("/test-a/brokers/ids")
    zk.stop()

Where Java or the package is missing, ``start()`` raises
``ZooKeeperUnavailable`` saying what to install.  A ZooKeeper still running
when the Python process exits is killed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import time
import weakref
from pathlib import Path

__all__ = ["ZooKeeperServer", "ZooKeeperUnavailable", "zookeeper_classpath", "LAUNCHER", "listening_ports"]

LAUNCHER = Path(__file__).resolve().parent / "ZooKeeperOnLoopback.java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
#: An SLF4J binding for ZooKeeper's log lines (without one they are dropped).
SLF4J_SIMPLE = Path("/usr/share/java/slf4j-simple.jar")

#: ZooKeeper's tick: sessions may last 2 to 300 ticks (the bounds are set in zoo.cfg),
#: so short session timeouts (a dead broker's registration goes quickly) are allowed.
TICK_MS = 200

_LIVE: weakref.WeakSet[ZooKeeperServer] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.kill()


class ZooKeeperUnavailable(RuntimeError):
    """Java or Debian's zookeeper package is missing (the message says which, and how to install it)."""


def zookeeper_classpath() -> str:
    if shutil.which("java") is None:
        raise ZooKeeperUnavailable("no java on PATH: install a Java 17 runtime (Debian: apt-get install "
                                   "openjdk-17-jre-headless zookeeper; in this repository bin/install-system-deps)")
    if not ZOOKEEPER_JAR.exists():
        raise ZooKeeperUnavailable(f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper package "
                                   "(apt-get install zookeeper; in this repository bin/install-system-deps)")
    jars = [ZOOKEEPER_JAR]   # its manifest's Class-Path names its dependencies
    if SLF4J_SIMPLE.exists():
        jars.append(SLF4J_SIMPLE)
    return ":".join(str(j) for j in jars)


def listening_ports(pid: int) -> list[int]:
    """The TCP ports process ``pid`` listens on (its socket inodes matched in /proc/<pid>/net/tcp{,6})."""
    inodes = set()
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}", encoding="ascii") as fh:
            next(fh, None)     # the header
            for line in fh:
                fields = line.split()
                if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:     # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


class ZooKeeperServer:
    def __init__(self, tmp_path):
        self.dir = Path(tmp_path) / "zookeeper"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.dir / "data"
        self.config_path = self.dir / "zoo.cfg"
        self.log_path = self.dir / "zookeeper.log"
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    # -- lifecycle ------------------------------------------------------------------

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"tickTime={TICK_MS}\n"
            f"dataDir={self.data_dir}\n"
            "admin.enableServer=false\n"
            f"minSessionTimeout={2 * TICK_MS}\n"
            f"maxSessionTimeout={300 * TICK_MS}\n"
            "maxClientCnxns=0\n"
            # Test data need no snapshots kept around.
            "autopurge.purgeInterval=0\n",
            encoding="utf-8")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 60) -> ZooKeeperServer:
        """Start ZooKeeper and wait until it listens (the Java source launcher compiles first: ~1-2 s)."""
        if self.running:
            raise RuntimeError("ZooKeeper already running")
        classpath = zookeeper_classpath()
        self._write_config()
        command = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.jmx.log4j.disable=true",
                   "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                   "-cp", classpath, str(LAUNCHER), str(self.config_path)]
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=str(self.dir), start_new_session=True)
        _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while (port := self._listening_port()) is None:
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"ZooKeeper did not listen within {timeout}s\n{self.log_text()[-4000:]}")
            time.sleep(0.05)     # between two looks at the process's sockets
        self.port = port
        return self

    def _listening_port(self) -> int | None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited with status {self.process.returncode}\n{self.log_text()[-4000:]}")
        ports = listening_ports(self.process.pid)
        return ports[0] if ports else None

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM, and wait for the JVM to exit."""
        if self.process is None:
            return None
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        _LIVE.discard(self)
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        _LIVE.discard(self)

    # -- use ------------------------------------------------------------------------

    @property
    def hosts(self) -> str:
        if self.port is None:
            raise RuntimeError("ZooKeeper is not started")
        return f"127.0.0.1:{self.port}"

    def connect_string(self, chroot: str | None = None) -> str:
        """``zookeeper.connect`` for a broker: this server, and the chroot (``/name``) if given."""
        return self.hosts + (chroot or "")

    @contextlib.contextmanager
    def client(self, chroot: str | None = None, timeout: float = 10.0):
        """A started kazoo client (its blocking API); stopped on exit."""
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.hosts, timeout=timeout)
        client.start(timeout=timeout)
        try:
            if chroot:
                client.ensure_path(chroot)
                client.chroot = chroot
            yield client
        finally:
            client.stop()
            client.close()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def __repr__(self) -> str:
        state = f"pid {self.process.pid}" if self.process is not None and self.running else "stopped"
        return f"<ZooKeeperServer {self.hosts if self.port else '(no port)'} {state}>"
