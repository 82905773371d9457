"""The pytest plugin (``twisted_kafka.testing.pytest_plugin``), run on test suites of its own with pytester.

* a broker that cannot start errors the tests that asked for it with the
  broker's one-line reason, at once (not after the startup timeout), and the
  broker's output is in each failing test's report;
* the fixtures: one session broker shared by default, a marker's settings get
  a broker of their own (shared by the tests asking for the same), function
  scope gives each test its own; ``kafka_topic`` is new for each test and
  deleted after it; ``kafka_admin`` is skipped with the reason where
  confluent-kafka is missing; a failing test gets the broker's output of
  that test in its report;
* under pytest-xdist every worker has its own broker.
"""

from __future__ import annotations

import json
import re

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.integration

#: The inner suites' brokers report their identity here (a JSON line per test).
RECORD = '''
import json, os

def record(pytester_dir, **fields):
    with open(os.path.join(pytester_dir, "records.jsonl"), "a") as fh:
        fh.write(json.dumps(fields) + "\\n")
'''


def records(pytester) -> list[dict]:
    path = pytester.path / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_broker_that_cannot_start_errors_the_tests_with_its_reason_and_log(pytester):
    pytester.makeini("[pytest]\nkafka_broker_startup_timeout = 600\n"
                     "kafka_broker_overrides =\n    num.io.threads = many\n")
    pytester.makepyfile("""
        def test_bootstrap(kafka_bootstrap_servers):
            pass

        def test_topic(kafka_topic):
            pass
    """)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    reason = "Broker startup failed: Invalid value 'many' for configuration num.io.threads: not a number of type INT"
    output = result.stdout.str()
    # Each test: the one-line reason as the error, and the broker's output in the report. Counted in
    # the ERRORS section: the short summary repeats the reason only where the terminal is wide enough.
    errors_section = output.split("short test summary info", 1)[0]
    assert errors_section.count(f"kafka_broker could not start: {reason}") == 2, output
    assert errors_section.count("Captured kafka broker log setup") == 2, output
    assert "did not report being started" not in output and "Traceback" not in output
    # The broker was started once: the second test got the first one's failure.
    seconds = float(re.search(r"2 errors in ([\d.]+)s", output)[1])
    assert seconds < 300, f"the failure waited for the 600 s startup timeout: {output}"


def test_the_broker_log_of_a_failing_test_is_in_its_report(pytester):
    pytester.makepyfile("""
        from confluent_kafka import Producer

        def test_fails(kafka_client_config):
            producer = Producer(kafka_client_config)
            producer.produce("auto-created-by-the-test", b"x")
            producer.flush(30)
            assert False, "the test's own failure"
    """)
    # In a process of its own: the failed test's traceback keeps its producer (and librdkafka's threads) alive.
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    section = result.stdout.str().split("Captured kafka broker log call", 1)[1]
    # What the broker did during the test: it created the topic the producer asked for.
    assert "auto-created-by-the-test" in section, section


def test_brokers_are_shared_by_settings_and_topics_are_each_tests_own(pytester):
    pytester.makepyfile(recorder=RECORD)
    pytester.makepyfile(test_inner=f"""
        import pytest
        from recorder import record

        DIR = {str(pytester.path)!r}

        def test_one(kafka_broker, kafka_topic):
            record(DIR, test="one", pid=kafka_broker.pid, security=kafka_broker.security_protocol,
                   topic=kafka_topic, topics=kafka_broker.topic_names())

        @pytest.mark.kafka_broker(security="SASL_SSL", overrides={{"num.io.threads": 3}})
        def test_two(kafka_broker, kafka_client_config, kafka_topic):
            assert kafka_client_config["security.protocol"] == "SASL_SSL"
            record(DIR, test="two", pid=kafka_broker.pid, security=kafka_broker.security_protocol,
                   topic=kafka_topic, topics=kafka_broker.topic_names())

        @pytest.mark.kafka_topic(partitions=4)
        def test_three(kafka_broker, kafka_admin, kafka_topic):
            partitions = len(kafka_admin.list_topics(timeout=10).topics[kafka_topic].partitions)
            record(DIR, test="three", pid=kafka_broker.pid, security=kafka_broker.security_protocol,
                   topic=kafka_topic, topics=kafka_broker.topic_names(), partitions=partitions)

        @pytest.mark.kafka_broker(overrides={{"num.io.threads": 3}}, security="SASL_SSL")
        def test_four(kafka_broker):
            record(DIR, test="four", pid=kafka_broker.pid, security=kafka_broker.security_protocol)
    """)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=4)
    by_test = {r["test"]: r for r in records(pytester)}
    one, two, three, four = (by_test[name] for name in ("one", "two", "three", "four"))
    assert one["pid"] == three["pid"] != two["pid"] == four["pid"]          # one broker per distinct settings
    assert (one["security"], two["security"]) == ("PLAINTEXT", "SASL_SSL")
    assert "test_two[kafka-SASL_SSL,num.io.threads=3]" in result.stdout.str()
    # Each test's topic is new, named after the test, and the earlier test's topic is gone.
    assert one["topic"].startswith("test_one-") and three["topic"].startswith("test_three-")
    assert one["topics"] == [one["topic"]] and three["topics"] == [three["topic"]]
    assert three["partitions"] == 4


def test_function_scope_gives_each_test_its_own_broker(pytester):
    pytester.makeini("[pytest]\nkafka_broker_scope = function\n")
    pytester.makepyfile(recorder=RECORD)
    pytester.makepyfile(test_inner=f"""
        from recorder import record

        def test_a(kafka_broker):
            record({str(pytester.path)!r}, pid=kafka_broker.pid)

        def test_b(kafka_bootstrap_servers, kafka_broker):
            record({str(pytester.path)!r}, pid=kafka_broker.pid)
    """)
    pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider").assert_outcomes(passed=2)
    first, second = records(pytester)
    assert first["pid"] != second["pid"]


def test_kafka_admin_is_skipped_with_the_reason_without_confluent_kafka(pytester):
    pytester.makeconftest("""
        import sys
        sys.modules["confluent_kafka"] = None      # as if it were not installed
        sys.modules["confluent_kafka.admin"] = None
    """)
    pytester.makepyfile("""
        def test_admin(kafka_admin):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*kafka_admin is a confluent-kafka AdminClient: pip install confluent-kafka*"])


def test_each_xdist_worker_starts_its_own_broker(pytester):
    pytester.makepyfile(recorder=RECORD)
    pytester.makepyfile(test_inner=f"""
        import pytest
        from recorder import record

        @pytest.mark.parametrize("n", range(6))
        def test_n(n, kafka_broker, worker_id):
            record({str(pytester.path)!r}, worker=worker_id, pid=kafka_broker.pid,
                   bootstrap=kafka_broker.bootstrap_servers, directory=str(kafka_broker.directory))
    """)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    brokers = {}
    for record in records(pytester):
        brokers.setdefault(record["worker"], set()).add((record["pid"], record["bootstrap"], record["directory"]))
    assert sorted(brokers) == ["gw0", "gw1"]
    assert all(len(seen) == 1 for seen in brokers.values()), brokers      # one broker per worker ...
    (pid0, port0, dir0), = brokers["gw0"]
    (pid1, port1, dir1), = brokers["gw1"]
    assert pid0 != pid1 and port0 != port1 and dir0 != dir1              # ... sharing nothing
    assert "popen-gw0" in dir0 and "popen-gw1" in dir1
