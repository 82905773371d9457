"""docs/spark.md's quick start, taken from the page itself and run as a user runs it: outside any virtualenv.

The script is the page's first Python block under "Quick start", the command
its ``.venv/bin/python read_events.py`` line (with the bootstrap server and
topic as the arguments it takes); ``python3`` on the ``PATH`` is the
system's, without twisted_kafka, so Spark's Python workers find the data
source only if ``register()`` gives them the driver's interpreter.
"""

from __future__ import annotations

import re
import subprocess

from support.broker_process import REPO_ROOT
from support.user_env import system_python_lacks_twisted_kafka, user_env

from .conftest import create_topic

DOC = REPO_ROOT / "docs" / "spark.md"
RECORDS = [(None, b"one"), (b"k2", b"two"), (None, b"three")]


def quick_start() -> tuple[str, str, list[str]]:
    """The file name, the script and the command of docs/spark.md's quick start."""
    section = DOC.read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    name = re.search(r"save this as `([^`]+)`", section).group(1)
    script = next(body for language, body in blocks if language == "python")
    command = next(line.split("#")[0].split() for language, body in blocks if language == "sh"
                   for line in body.splitlines() if name in line)
    return name, script, command


def table_rows(output: str) -> list[list[str]]:
    """The rows of ``DataFrame.show()``'s table, header first."""
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in output.splitlines()
            if line.startswith("|")]


def test_the_quick_start_runs_as_documented_outside_a_virtualenv(kafka, tmp_path):
    from confluent_kafka import Producer

    name, script, command = quick_start()
    assert command == [".venv/bin/python", name], command
    python = REPO_ROOT / command[0]
    assert python.exists(), f"{python} is missing: make .venv/.test-installed creates it"
    (tmp_path / name).write_text(script, encoding="utf-8")

    topic = create_topic(kafka.bootstrap, partitions=1, prefix="quick-start")
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for key, value in RECORDS:
        producer.produce(topic, value, key)
    assert producer.flush(30) == 0

    env = user_env()
    assert system_python_lacks_twisted_kafka(env), "python3 on a user's PATH has twisted_kafka: nothing to show"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"         # the driver and its UI bind loopback only
    # A JVM that lives seconds needs no optimising compiler: a third less CPU on this 2-core machine
    # (as support/zookeeper.py runs ZooKeeper); the program and the command are the page's.
    env["JAVA_TOOL_OPTIONS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    done = subprocess.run([str(python), name, kafka.bootstrap, topic], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stderr[-6000:]}"
    assert table_rows(done.stdout) == [["key", "value", "partition", "offset"]] + [
        [key.decode() if key else "NULL", value.decode(), "0", str(offset)]
        for offset, (key, value) in enumerate(RECORDS)], done.stdout
