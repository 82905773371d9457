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
