"""``register()``: which interpreter the data source's Python workers get, and that nothing else changes.

Spark reads ``SparkContext.pythonExec`` when the data source is registered
(pyspark's ``_wrap_function``); a stand-in session records that value.  The
real thing -- a job run as ``.venv/bin/python job.py`` outside a virtualenv --
is tests/integration/spark/test_quick_start.py.
"""

from __future__ import annotations

import sys

import pytest
from pyspark.errors import AnalysisException

from twisted_kafka.spark import KafkaDataSource, register


class AlreadyRegistered(AnalysisException):
    """What Spark raises for a second registration (a JVM condition pyspark's own table does not list)."""

    def getCondition(self) -> str:
        return "DATA_SOURCE_ALREADY_EXISTS"


class Context:
    def __init__(self, master: str, conf: dict[str, str]):
        self.master = master
        self.conf = conf
        self.pythonExec = "python3"          # pyspark: PYSPARK_PYTHON, else python3

    def getConf(self):
        return self.conf


class Registration:
    def __init__(self, context, exists: bool = False):
        self.context = context
        self.exists = exists
        self.seen: list[tuple[type, str]] = []

    def register(self, source):
        self.seen.append((source, self.context.pythonExec))
        if self.exists:
            raise AlreadyRegistered(message="data source twisted_kafka already exists")


class Session:
    def __init__(self, master: str = "local[*]", conf: dict[str, str] | None = None, exists: bool = False):
        self.sparkContext = Context(master, conf or {})
        self.dataSource = Registration(self.sparkContext, exists)


@pytest.fixture(autouse=True)
def no_pyspark_python(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)


@pytest.mark.parametrize("master", ["local[*]", "local[2]", "local-cluster[2,1,1024]"])
def test_a_local_master_gives_the_workers_the_drivers_interpreter(master):
    session = Session(master)
    register(session)
    assert session.dataSource.seen == [(KafkaDataSource, sys.executable)]
    assert session.sparkContext.pythonExec == "python3"      # the session's other workers keep Spark's choice


def test_spark_pyspark_python_is_used_when_set():
    session = Session("spark://master:7077", {"spark.pyspark.python": "./environment/bin/python"})
    register(session)
    assert session.dataSource.seen == [(KafkaDataSource, "./environment/bin/python")]
    assert session.sparkContext.pythonExec == "python3"


def test_pyspark_python_wins_and_nothing_is_changed(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python/bin/python3")
    session = Session("local[*]", {"spark.pyspark.python": "/elsewhere/python"})
    session.sparkContext.pythonExec = "/opt/python/bin/python3"
    register(session)
    assert session.dataSource.seen == [(KafkaDataSource, "/opt/python/bin/python3")]


def test_a_cluster_master_without_a_named_python_keeps_sparks_default():
    session = Session("spark://master:7077")
    register(session)
    assert session.dataSource.seen == [(KafkaDataSource, "python3")]


def test_registering_again_is_harmless_and_restores_the_context():
    session = Session("local[*]", exists=True)
    register(session)
    assert session.dataSource.seen == [(KafkaDataSource, sys.executable)]
    assert session.sparkContext.pythonExec == "python3"
