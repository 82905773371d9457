"""The open-file limit and the budget derived from it; the log-dir lock."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from twisted_kafka.config import StartupError
from twisted_kafka.server.broker_metadata import LOCK_FILE, LogDirLocks
from twisted_kafka.server.descriptor_budget import BROKER_DESCRIPTORS, descriptor_budget


def test_the_budget_shares_the_limit_between_connections_the_broker_and_segment_files():
    budget = descriptor_budget(20_000, 20_000, max_connections=2**31 - 1)
    assert (budget.connections, budget.broker, budget.log_files) == (5_000, BROKER_DESCRIPTORS, 14_872)
    assert budget.partitions == 14_872
    assert budget.describe() == ("Open-file limit 20000 (hard limit 20000): 5000 descriptors kept for connections, "
                                 "128 for the broker itself, 14872 for log segment files; partition budget 14872")
    # A smaller max.connections keeps fewer for connections.
    assert descriptor_budget(20_000, 20_000, max_connections=100).partitions == 19_772
    raised = descriptor_budget(1024, 4096, max_connections=2**31 - 1, raised_from=256)
    assert "soft limit raised from 256 to the hard limit 4096" in raised.describe()
    # Too few descriptors for any partition: the budget is 0, but loading still gets a few files.
    tiny = descriptor_budget(128, 128, max_connections=2**31 - 1)
    assert tiny.partitions == 0 and tiny.log_files == 16


def test_the_soft_limit_is_raised_to_the_hard_limit():
    script = ("import resource\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 256))\n"
              "from twisted_kafka.server.descriptor_budget import raise_open_file_limit\n"
              "print(raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=os.getcwd()).stdout
    assert out.strip() == "(256, 256, 64) (256, 256)"


def test_a_log_dir_is_locked_once(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    held = LogDirLocks(dirs)
    assert (tmp_path / "b" / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    with pytest.raises(StartupError) as refused:
        LogDirLocks([str(tmp_path / "c"), dirs[1]])
    assert (refused.value.key, refused.value.value) == ("log.dirs", dirs[1])
    assert str(refused.value) == (f"log.dirs: {dirs[1]}: in use by another broker: "
                                  f"process {os.getpid()} holds {dirs[1]}/{LOCK_FILE}")
    # The lock taken on the way (c) was let go again; releasing frees a and b.
    LogDirLocks([str(tmp_path / "c")]).release()
    held.release()
    LogDirLocks(dirs).release()
