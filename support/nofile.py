"""A broker process started with a chosen open-file limit (``RLIMIT_NOFILE``).

    broker = NofileBroker(tmp_path, nofile=(256, 256)).start()   # (soft, hard)
    ...
    broker.stop()
    broker.nofile = (128, 128)     # the next start gets this limit
    broker.start()

The limit is set in a small Python shim that then ``exec``s the usual start
command (``BrokerProcess.command``), so the broker runs exactly as an
operator starts it, under ``ulimit -n``.  ``open_fds()`` counts the
descriptors the running broker holds (Linux ``/proc``).
"""

from __future__ import annotations

import os
import sys

from support.broker_process import BrokerProcess

__all__ = ["NofileBroker", "open_fds", "nofile_limits"]

_SHIM = ("import os, resource, sys\n"
         "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))\n"
         "os.execv(sys.argv[3], sys.argv[3:])\n")


def open_fds(pid: int) -> int:
    """How many descriptors process ``pid`` has open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def nofile_limits(pid: int) -> tuple[int, int]:
    """(soft, hard) open-file limit of process ``pid``, from ``/proc/<pid>/limits``."""
    with open(f"/proc/{pid}/limits", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError(f"no open-file limit in /proc/{pid}/limits")


class NofileBroker(BrokerProcess):
    def __init__(self, tmp_path, overrides: dict[str, str] | None = None, *, nofile: tuple[int, int],
                 **kwargs):
        super().__init__(tmp_path, overrides, **kwargs)
        self.nofile = nofile

    @property
    def command(self) -> list[str]:
        soft, hard = self.nofile
        return [sys.executable, "-c", _SHIM, str(soft), str(hard), *super().command]
