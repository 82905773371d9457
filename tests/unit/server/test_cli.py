"""The console script is a front to ``twistd -n kafka``: the plugin stays the one way to start."""

import pytest

from twisted_kafka.cli import HELP, USAGE_STATUS, twistd_argv


def test_config_file_and_overrides_go_to_the_kafka_plugin():
    assert twistd_argv(["etc/server.properties", "--override", "num.partitions=3"]) == [
        "twistd", "--nodaemon", "--pidfile=", "kafka", "--config", "etc/server.properties",
        "--override", "num.partitions=3"]


@pytest.mark.parametrize(("args", "says"), [([], "a CONFIG_FILE is required"),
                                            (["--override", "x=1"], "the CONFIG_FILE comes first, before --override"),
                                            (["--overide", "x=1"], "option --overide not recognized")])
def test_a_command_line_without_a_config_file_first_is_one_line(capsys, args, says):
    with pytest.raises(SystemExit) as exited:
        twistd_argv(args)
    assert exited.value.code == USAGE_STATUS
    err = capsys.readouterr().err
    assert err == f"twisted-kafka-server-start: {says} (--help lists the options)\n"


def test_version_prints_the_version_and_exits_zero(capsys):
    import twisted_kafka

    with pytest.raises(SystemExit) as exited:
        twistd_argv(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"twisted_kafka {twisted_kafka.__version__}\n"


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["etc/server.properties", "--override", "a=1", "--help"]])
def test_help_prints_the_options_and_exits_zero(capsys, args):
    with pytest.raises(SystemExit) as exited:
        twistd_argv(args)
    assert exited.value.code == 0 and capsys.readouterr().out == HELP


def test_an_override_value_that_looks_like_help_is_a_value():
    assert twistd_argv(["f", "--override", "--help"])[-2:] == ["--override", "--help"]


def test_the_help_lists_every_option_of_the_plugin_but_config():
    from twisted.plugins.twisted_kafka_plugin import Options

    long_names = {option.rstrip("=") for option in Options().longOpt}
    described = {line.split()[0].lstrip("-") for line in HELP.splitlines() if line.startswith("  --")}
    assert "override" in long_names and long_names - {"config"} <= described


@pytest.mark.parametrize("level", ["debug", "TRACE", "Warn"])
def test_the_plugin_takes_a_root_log_level_in_any_case(level):
    from support.broker_process import BASE_CONFIG
    from twisted.plugins.twisted_kafka_plugin import Options

    options = Options()
    options.parseOptions(["--config", str(BASE_CONFIG), "--log-level", level])
    assert options["log-level"] == level.upper()


def test_a_log_level_that_is_none_is_one_line_and_status_2(capsys):
    from twisted.plugins.twisted_kafka_plugin import Options

    with pytest.raises(SystemExit) as info:
        Options().parseOptions(["--config", "no-such.properties", "--log-level", "LOUD"])
    assert info.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith("kafka: --log-level LOUD is not a level (DEBUG, ERROR, FATAL, INFO, TRACE, WARN) "
                         "(--help lists the options)")
