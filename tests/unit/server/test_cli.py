"""The console script is a front to ``twistd -n kafka``: the plugin stays the one way to start."""

import pytest

from twisted_kafka.cli import twistd_argv


def test_config_file_and_overrides_go_to_the_kafka_plugin():
    assert twistd_argv(["etc/server.properties", "--override", "num.partitions=3"]) == [
        "twistd", "--nodaemon", "--pidfile=", "kafka", "--config", "etc/server.properties",
        "--override", "num.partitions=3"]


@pytest.mark.parametrize("args", [[], ["--override", "x=1"]])
def test_a_config_file_is_required(args):
    with pytest.raises(SystemExit) as exited:
        twistd_argv(args)
    assert "CONFIG_FILE" in str(exited.value)


def test_version_prints_the_version_and_exits_zero(capsys):
    import twisted_kafka

    with pytest.raises(SystemExit) as exited:
        twistd_argv(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"twisted_kafka {twisted_kafka.__version__}\n"


def test_help_prints_the_usage_and_exits_zero(capsys):
    with pytest.raises(SystemExit) as exited:
        twistd_argv(["--help"])
    assert exited.value.code == 0 and "CONFIG_FILE" in capsys.readouterr().out
