"""A twisted_kafka broker in a child process, started the README way.

Integration tests run the broker exactly as an operator does --
``bin/twisted-kafka-server-start CONFIG --override key=value ...`` with the
shipped ``etc/server.properties`` as the base configuration -- and talk to it
over loopback sockets with real clients.

    broker = BrokerProcess(tmp_path, {"num.io.threads": "2"}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ...
    assert broker.stop() == 0

Everything else -- ports 0 read back from the broker's started line,
``{port:NAME}`` placeholders, restarts on the same ports, the admin
endpoint's URL, startup failures raised as soon as the broker reports them,
``broker.log`` -- is ``twisted_kafka.testing.process.BrokerProcess``, the one
way brokers are started for tests (``EmbeddedBroker``, which the pytest
plugin gives other projects, is built on it too).  This layer only chooses
the start script and the shipped configuration file.
"""

from __future__ import annotations

from pathlib import Path

from twisted_kafka.testing import process as _process
from twisted_kafka.testing.process import (
    ADMIN_REST,
    STARTUP_FAILURE_EXIT_GRACE,
    BrokerStartupError,
    NotStarted,
    answers_api_versions,
    bound_listeners,
)

__all__ = ["BrokerProcess", "BrokerExited", "REPO_ROOT", "START_SCRIPT", "BASE_CONFIG", "answers_api_versions",
           "bound_listeners", "NotStarted", "ADMIN_REST", "STARTUP_FAILURE_EXIT_GRACE"]

REPO_ROOT = Path(__file__).resolve().parents[1]
START_SCRIPT = REPO_ROOT / "bin" / "twisted-kafka-server-start"
BASE_CONFIG = REPO_ROOT / "etc" / "server.properties"

#: The error a broker that did not start raises (``returncode``, ``log``, and its one-line ``reason``).
BrokerExited = BrokerStartupError


class BrokerProcess(_process.BrokerProcess):
    """``bin/twisted-kafka-server-start`` on ``etc/server.properties`` (listeners, log.dirs and the admin
    endpoint set by the harness: see ``twisted_kafka.testing.process``)."""

    def __init__(self, tmp_path, overrides: dict[str, str] | None = None, *, control_plane: bool = True,
                 ports: dict[str, int] | None = None):
        super().__init__(tmp_path, overrides, control_plane=control_plane, ports=ports, base_config=BASE_CONFIG,
                         launcher=[str(START_SCRIPT)])
