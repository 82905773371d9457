"""The one line a failed startup prints: key, value and reason, never more than one line."""

from __future__ import annotations

import pytest

from twisted_kafka.config import ConfigError, StartupError
from twisted_kafka.server.startup import debug_enabled, exit_with, failure_line


def test_a_config_error_is_worded_as_kafka_words_it():
    assert failure_line(ConfigError("num.io.threads", "not a number of type INT", "many")) == (
        "Broker startup failed: Invalid value 'many' for configuration num.io.threads: not a number of type INT")


def test_a_startup_error_names_key_value_and_reason():
    error = StartupError("listeners", "PLAINTEXT://127.0.0.1:9092", "Couldn't listen on 127.0.0.1:9092")
    assert failure_line(error) == ("Broker startup failed: listeners: PLAINTEXT://127.0.0.1:9092: "
                                   "Couldn't listen on 127.0.0.1:9092")


def test_an_os_error_inside_a_log_dir_names_log_dirs(tmp_path):
    error = IsADirectoryError(21, "Is a directory", str(tmp_path / "logs" / "t-0" / "0.log"))
    line = failure_line(error, [str(tmp_path / "other"), str(tmp_path / "logs")])
    assert line.startswith(f"Broker startup failed: log.dirs: {tmp_path / 'logs'}: [Errno 21] Is a directory")
    # ... but not a path that only starts with the same characters.
    assert "log.dirs" not in failure_line(IsADirectoryError(21, "x", str(tmp_path / "logs2")), [str(tmp_path / "logs")])


def test_the_line_is_one_line_whatever_the_message():
    assert failure_line(RuntimeError("first\nsecond\n  third")) == "Broker startup failed: first second third"
    assert failure_line(RuntimeError()) == "Broker startup failed: RuntimeError"


@pytest.mark.parametrize("value, enabled", [(None, False), ("", False), ("0", False), ("false", False),
                                            ("1", True), ("yes", True)])
def test_twisted_kafka_debug(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("TWISTED_KAFKA_DEBUG", raising=False)
    else:
        monkeypatch.setenv("TWISTED_KAFKA_DEBUG", value)
    assert debug_enabled() is enabled


def test_exit_with_prints_the_line_on_stderr_and_exits_one(monkeypatch, capsys):
    monkeypatch.delenv("TWISTED_KAFKA_DEBUG", raising=False)
    exited = exit_with(StartupError("log.dirs", "/x", "Not a directory"))
    assert exited.code == 1
    assert capsys.readouterr() == ("", "Broker startup failed: log.dirs: /x: Not a directory\n")
    monkeypatch.setenv("TWISTED_KAFKA_DEBUG", "1")
    try:
        raise StartupError("log.dirs", "/x", "Not a directory")
    except StartupError as exc:
        exit_with(exc)
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("Broker startup failed: log.dirs: /x: Not a directory\n")


def _report(tmp_path, daemon: bool):
    import os

    from twisted.internet.defer import Deferred

    from twisted_kafka.server.startup import StartupReport

    read, write = os.pipe()
    pidfile = tmp_path / "twistd.pid"
    pidfile.write_text("4711")
    options = {"pidfile": str(pidfile), **({"statusPipe": write} if daemon else {})}
    started: Deferred = Deferred()
    report = StartupReport(options, started)
    report.startService()
    return read, write, pidfile, options, started


def test_the_report_answers_twistds_parent_only_once_the_broker_started(tmp_path):
    import os

    read, _, pidfile, options, started = _report(tmp_path, daemon=True)
    assert options["statusPipe"] is None          # taken from twistd, which would answer "0" at once
    started.callback("broker")
    assert os.read(read, 100) == b"0" and pidfile.exists()
    os.close(read)


def test_a_failed_start_answers_the_failure_line_and_removes_the_pidfile(tmp_path):
    import os

    read, _, pidfile, _, started = _report(tmp_path, daemon=True)
    started.errback(StartupError("listeners", "PLAINTEXT://127.0.0.1:9092", "Address already in use " * 10))
    started.addErrback(lambda _: None)
    status = os.read(read, 200)
    assert status.startswith(b"1 Broker startup failed: listeners: PLAINTEXT://127.0.0.1:9092") and len(status) == 100
    assert not pidfile.exists()
    os.close(read)


def test_without_a_daemon_a_failed_start_still_removes_the_pidfile(tmp_path):
    import os

    read, write, pidfile, _, started = _report(tmp_path, daemon=False)
    started.errback(StartupError("log.dirs", "/x", "Not a directory"))
    started.addErrback(lambda _: None)
    assert not pidfile.exists()
    os.close(read)
    os.close(write)


@pytest.mark.parametrize(("debug", "kept"), [("", ["info line", "warn line"]),
                                              ("1", ["debug line", "info line", "warn line"])])
def test_the_broker_log_keeps_info_and_above_unless_debugging(capsys, monkeypatch, debug, kept):
    from twisted.logger import Logger

    from twisted_kafka.config import KafkaConfig
    from twisted_kafka.logging import LogLevels
    from twisted_kafka.server.startup import broker_log_observer, configure_log_levels

    monkeypatch.setenv("TWISTED_KAFKA_DEBUG", debug)
    levels = configure_log_levels(KafkaConfig.from_props({}), levels=LogLevels())
    observer = broker_log_observer({"logfile": "-", "nodaemon": True}, levels)   # twistd -n: standard output
    log = Logger(namespace="test", observer=observer)
    log.debug("debug line")
    log.info("info line")
    log.warn("warn line")
    assert [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()] == kept


def test_log_levels_and_the_command_line_s_root_level_reach_the_one_filter(capsys):
    from twisted.logger import Logger

    from twisted_kafka.config import KafkaConfig
    from twisted_kafka.logging import LogLevels
    from twisted_kafka.server.startup import broker_log_observer, configure_log_levels

    config = KafkaConfig.from_props({"log.levels": "kafka.request.logger=debug,root=error"})
    levels = configure_log_levels(config, "WARN", levels=LogLevels())       # --log-level WARN wins over root=error
    observer = broker_log_observer({"logfile": "-", "nodaemon": True}, levels)
    Logger(namespace="kafka.request.logger", observer=observer).debug("request line")
    Logger(namespace="twisted_kafka.controller", observer=observer).info("info line")
    Logger(namespace="twisted_kafka.controller", observer=observer).warn("warn line")
    assert [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()] == ["request line", "warn line"]
    levels.set_level("kafka.controller", "INFO")                             # at runtime: the same filter
    Logger(namespace="twisted_kafka.controller", observer=observer).info("info line")
    assert capsys.readouterr().out.endswith("info line\n")


def test_a_log_levels_name_that_is_no_logger_fails_startup_naming_the_key():
    from twisted_kafka.config import ConfigError, KafkaConfig
    from twisted_kafka.logging import LogLevels
    from twisted_kafka.server.startup import configure_log_levels, failure_line

    with pytest.raises(ConfigError) as info:
        configure_log_levels(KafkaConfig.from_props({"log.levels": "kafka.controler=DEBUG"}), levels=LogLevels())
    assert failure_line(info.value) == ("Broker startup failed: Invalid value 'kafka.controler=DEBUG' for "
                                        "configuration log.levels: Logger kafka.controler does not exist!")


def test_json_format_writes_json_lines_where_twistd_logs(capsys, tmp_path):
    import json

    from twisted.logger import Logger

    from twisted_kafka.logging import LogLevels
    from twisted_kafka.server.startup import broker_log_observer

    observer = broker_log_observer({"logfile": "-", "nodaemon": True}, LogLevels(), json_format=True)
    Logger(namespace="twisted_kafka.server", observer=observer).info("started {n}", n=1)
    Logger(namespace="twisted_kafka.server", observer=observer).debug("filtered")
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["message"] == "started 1"
    logfile = tmp_path / "broker.log"
    observer = broker_log_observer({"logfile": str(logfile)}, LogLevels(), json_format=True)   # --logfile
    Logger(namespace="twisted_kafka.server", observer=observer).warn("to the file")
    assert json.loads(logfile.read_text().splitlines()[-1])["level"] == "WARN"
