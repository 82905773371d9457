"""The shipped commands as an operator types them: options, help, and twistd's daemon mode.

* A misspelled option is one line on standard error -- the option and a
  pointer to ``--help`` -- and exit status 2, from
  ``bin/twisted-kafka-server-start`` and from ``twistd kafka`` alike;
  ``--help`` lists the options.
* ``twistd --pidfile FILE kafka ...`` without ``-n`` daemonizes: its
  parent exits 0 only once the broker has started, and 1 (with the failure
  line) when startup fails -- even when it fails after daemonizing (a port
  in use) -- and a broker that did not start leaves no pidfile behind.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from support.broker_process import REPO_ROOT, START_SCRIPT, BrokerProcess
from support.wait import wait_until

from .test_lifecycle import twistd_command

pytestmark = pytest.mark.integration

ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
CONFIG = str(REPO_ROOT / "etc" / "server.properties")


def run(command: list[str], cwd: Path | str = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=ENV, cwd=str(cwd))


COMMANDS = {
    "start-script": lambda *args: [str(START_SCRIPT), CONFIG, *args],
    "twistd-kafka": lambda *args: twistd_command("kafka", "--config", CONFIG, *args),
}


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("typo", [["--overide", "num.partitions=3"], ["--verison"], ["-x"]])
def test_a_misspelled_option_is_one_line_naming_it_and_pointing_at_help(name, typo):
    done = run(COMMANDS[name](*typo))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done
    assert len(lines) == 1 and done.stdout == "", done
    assert typo[0] in lines[0] and "--help" in lines[0], lines


def test_a_misspelled_option_before_the_config_file_is_one_line_too():
    done = run([str(START_SCRIPT), "--overide", "num.partitions=3"])
    lines = done.stderr.strip().splitlines()
    assert (done.returncode, len(lines), done.stdout) == (2, 1, ""), done
    assert "--overide" in lines[0] and "--help" in lines[0], lines


@pytest.mark.parametrize("command", [[str(START_SCRIPT), "--help"], [str(START_SCRIPT), CONFIG, "--help"],
                                     twistd_command("kafka", "--help")],
                         ids=["start-script", "start-script-after-config", "twistd-kafka"])
def test_help_lists_the_options(command):
    done = run(command)
    assert (done.returncode, done.stderr) == (0, ""), done
    described = [line.split() for line in done.stdout.splitlines() if line.startswith(" ")]
    for option in ("--override", "--version", "--help"):
        # An option's own line, with what it does: "  --override=  Override one ..."
        assert any(words[0].rstrip("=") == option and len(words) > 2 for words in described), done.stdout


# -- daemon mode ----------------------------------------------------------------------------------


def daemon(tmp_path: Path, broker: BrokerProcess) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """``twistd --pidfile --logfile kafka --config ...`` without -n: returns when its parent exits."""
    pidfile, logfile = tmp_path / "twistd.pid", tmp_path / "twistd.log"
    done = run(twistd_command("--pidfile", str(pidfile), "--logfile", str(logfile), "kafka", *broker.write_config()),
               cwd=tmp_path)
    return done, pidfile, logfile


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_daemon_that_fails_after_daemonizing_exits_one_and_leaves_no_pidfile(tmp_path):
    with socket.socket() as squatter:              # a port in use: found only once the daemon binds
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        busy = squatter.getsockname()[1]
        done, pidfile, logfile = daemon(tmp_path, BrokerProcess(tmp_path, ports={"PLAINTEXT": busy}))
        pid = int(pidfile.read_text()) if pidfile.exists() else None
        try:
            assert done.returncode == 1, done
            assert "Broker startup failed: listeners" in done.stderr, done.stderr
            wait_until(lambda: not pidfile.exists(), timeout=15, what="the failed daemon's pidfile to be removed")
            if pid is not None:
                wait_until(lambda: not alive(pid), timeout=15, what="the failed daemon to exit")
        finally:
            if pid is not None and alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert logfile.read_text().count("Broker startup failed") == 1


def test_a_daemon_with_a_bad_value_exits_one_before_writing_a_pidfile(tmp_path):
    done, pidfile, _ = daemon(tmp_path, BrokerProcess(tmp_path, {"num.io.threads": "many"}))
    assert done.returncode == 1, done
    assert "num.io.threads" in done.stderr and not pidfile.exists()


def test_a_daemon_that_starts_exits_zero_and_its_pidfile_goes_with_it(tmp_path):
    done, pidfile, logfile = daemon(tmp_path, BrokerProcess(tmp_path))
    assert pidfile.exists(), done
    pid = int(pidfile.read_text())
    try:
        assert (done.returncode, done.stderr) == (0, ""), done
        # The parent returned only once the broker was up: its started line is already logged.
        assert " started in " in logfile.read_text()
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not alive(pid), timeout=30, what="the daemon to stop")
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert not pidfile.exists()
    assert "Broker shut down" in logfile.read_text()
