"""etc/twisted-kafka.service, the example systemd unit, checked as far as can be done without systemd running.

``systemd-analyze verify`` (Debian's systemd package; bin/install-system-deps) parses it as systemd
would, with ExecStart pointed at this checkout's installed console script; the unit's ExecStart is
then run by the test as that command line, and stopped with the unit's KillSignal within its
TimeoutStopSec, exiting with a status systemd counts as success.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.broker_process import BASE_CONFIG, REPO_ROOT
from twisted_kafka.config import BROKER_CONFIG
from twisted_kafka.server.broker_lifecycle import DRAIN_TIMEOUT_SECONDS
from twisted_kafka.testing.process import BrokerProcess

UNIT = REPO_ROOT / "etc" / "twisted-kafka.service"
#: Where pip puts console scripts in the environment it installs into (the venv running these tests).
SCRIPTS = Path(sys.executable).parent


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True, empty_lines_in_values=False)
    parser.optionxform = str                    # systemd's keys are case-sensitive
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    return parser


def console_scripts() -> dict[str, str]:
    setup = configparser.ConfigParser(interpolation=None)
    setup.read(REPO_ROOT / "setup.cfg")
    lines = setup["options.entry_points"]["console_scripts"].strip().splitlines()
    return {name.strip(): target.strip() for name, target in (line.split("=", 1) for line in lines)}


def exec_start() -> tuple[Path, list[str]]:
    program, *args = unit()["Service"]["ExecStart"].split()
    return Path(program), args


def test_exec_start_runs_the_installed_start_script_on_a_config_file():
    program, args = exec_start()
    assert program.is_absolute() and program.parent.name == "bin"            # <venv>/bin/<console script>
    assert console_scripts()[program.name] == "twisted_kafka.cli:main"
    assert (SCRIPTS / program.name).exists(), "pip installs the console script the unit names"
    assert len(args) == 1 and args[0].endswith(".properties")


def test_the_service_settings_fit_the_broker():
    service = unit()["Service"]
    assert (service["Type"], service["Restart"], service["KillSignal"]) == ("simple", "on-failure", "SIGTERM")
    assert service["User"] not in ("", "root") and service["ReadWritePaths"]
    assert int(service["LimitNOFILE"]) >= 100_000
    # Room for the clean shutdown: the controlled shutdown's retries, the drain, then the flush.
    controlled = BROKER_CONFIG["controlled.shutdown.max.retries"].default * (
        BROKER_CONFIG["controlled.shutdown.retry.backoff.ms"].default + BROKER_CONFIG["request.timeout.ms"].default)
    assert int(service["TimeoutStopSec"]) > DRAIN_TIMEOUT_SECONDS + controlled / 1000
    assert service["RestartPreventExitStatus"] == "2"                      # a usage error: restarting won't help


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_the_unit(tmp_path):
    program, _ = exec_start()
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text(encoding="utf-8").replace(str(program), str(SCRIPTS / program.name)))
    verified = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr


def test_the_exec_start_command_line_runs_the_broker_and_the_kill_signal_stops_it_cleanly(tmp_path):
    program, _ = exec_start()
    broker = BrokerProcess(tmp_path, base_config=BASE_CONFIG, launcher=[str(SCRIPTS / program.name)]).start()
    assert broker.command[:2] == [str(SCRIPTS / program.name), broker.config_path]   # ExecStart's shape
    assert broker.stop(timeout=float(unit()["Service"]["TimeoutStopSec"])) == 0
