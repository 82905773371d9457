"""Fuzzing a real broker with mutated real-client requests; whatever was sent, SIGTERM stops it.

What the fuzzer found, each a black-box regression on a real broker process:

* a Fetch that names no partition and asks to wait (the fuzzer's frame: a
  JoinGroup v5 whose api key became Fetch's, read as a Fetch v5 with no
  topic and ``max_wait_ms`` of 8.8 days) waited for its whole
  ``max_wait_ms``: it watched no partition, so no append and not the
  shutdown's "answer every waiting fetch" reached it, the drain gave up
  after 30 s and the handler pool's stop waited for it forever (the process
  never exited).  Kafka answers a fetch of no partition at once;
* a member waiting in JoinGroup for the rest of its group (the other member
  has a long session) held the drain the same way; the group coordinator now
  answers it NOT_COORDINATOR when the broker starts draining;
* an IncrementalAlterConfigs in flight at SIGTERM waited for the controller's
  UpdateMetadata to this very broker, which the drain no longer read, until
  the drain's end, and failed with a critical traceback when the stop closed
  that channel.  The drain now stops the data plane only, and a late failure
  of an expired request is one line (unit tests: ``test_processor.py``,
  ``test_broker_lifecycle.py``, ``test_kafka_apis.py``; the moment is too
  narrow to hit on purpose from outside).

Then the fuzzer itself (``support/fuzzing.py``): Hypothesis draws
plans over a corpus captured from confluent-kafka, kafka-python and aiokafka
(admin calls, producers, group consumers, SASL), plays them on many
connections against a broker with PLAINTEXT, SASL_PLAINTEXT and a control
plane, checks liveness between rounds, and ends with SIGTERM: the broker
must exit 0 within the drain timeout plus the stop's grace, with no
traceback and no error in its output.  A short run is part of ``make
test``; a longer one is in ``make test-slow``; ``bench/fuzz.py`` runs it at
scale.
"""

from __future__ import annotations

import pytest

from support.broker_process import BrokerProcess
from support.fuzz_corpus import CaptureBroker, capture
from support.fuzzing import FUZZ_BROKER_OVERRIDES, Sender, fuzz_round, liveness, scan_log
from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.messages import FetchRequest, FindCoordinatorRequest, JoinGroupRequest
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.server.broker_lifecycle import DRAIN_TIMEOUT_SECONDS, STOP_GRACE_SECONDS

pytestmark = pytest.mark.integration

#: How long SIGTERM may take at most, whatever the clients sent.
STOP_BOUND = DRAIN_TIMEOUT_SECONDS + STOP_GRACE_SECONDS

#: The frame the fuzzer reduced the hang to: aiokafka's JoinGroup v5 (correlation id 3) with its api
#: key set to 1.  As a Fetch v5: replica_id 812666, max_wait_ms 761754223, min_bytes 1970285921, no topic.
FUZZED_FETCH = bytes.fromhex(
    "0001000500000003001166757a7a2d61696f2d636f6e73756d6572000c667a2d67726f75702d61696f000027f99b0027"
    "10003666757a7a2d61696f2d636f6e73756d65c42d33656432373330352d653032662d346339362d613164382d326164"
    "303538343535383761ffff0008636f6e73756d657200000001000a726f756e64726f62696e0000001000000000000100"
    "04667a2d6100000000")


def stop_within_bound(broker: BrokerProcess) -> str:
    """SIGTERM; the broker must exit 0 within the bound.  Returns the output of this run."""
    assert broker.stop(timeout=STOP_BOUND) == 0
    return broker.log_text(since_start=True)


def assert_clean(output: str) -> None:
    findings = scan_log(output)
    assert not findings, "\n---\n".join(findings[:5])
    pending = [line for line in output.splitlines() if "still pending" in line or "still in flight" in line]
    assert not pending, pending


# -- what the fuzzer found ----------------------------------------------------------------------------


@pytest.fixture
def start_broker(tmp_path):
    """Start a broker; one a failed test left running is killed afterwards."""
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str] | None = None) -> BrokerProcess:
        broker = BrokerProcess(tmp_path, overrides).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.kill()


def test_a_fetch_of_no_partition_is_answered_at_once_and_does_not_hold_the_shutdown(start_broker):
    broker = start_broker()
    with RawClient(broker.data_port) as fuzzed, RawClient(broker.data_port) as plain:
        fuzzed.send_frame(FUZZED_FETCH)
        correlation_id, answer = fuzzed.read_response(ApiKey.FETCH, 5, timeout=10)
        assert correlation_id == 3 and answer.responses == []
        # The same, legible: a consumer's Fetch v4 of no topic, willing to wait 24 days.
        empty = plain.request(FetchRequest(version=4, replica_id=-1, max_wait_ms=2 ** 31 - 1, min_bytes=1,
                                           max_bytes=1 << 20, isolation_level=0, topics=[]), 4, timeout=10)
        assert empty.responses == []
        output = stop_within_bound(broker)
    assert_clean(output)


def test_a_member_waiting_in_join_group_is_answered_when_the_broker_stops(start_broker):
    broker = start_broker({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"})
    with RawClient(broker.data_port) as first, RawClient(broker.data_port) as second:
        def coordinator_ready() -> bool:
            return first.request(FindCoordinatorRequest(key="g", key_type=0), 1).error_code == ErrorCode.NONE

        wait_until(coordinator_ready, 30, what="the group coordinator of g")
        P = JoinGroupRequest.JoinGroupRequestProtocol

        def join(client: RawClient, member_id: str = "") -> int:
            # A session of 10 minutes and the largest rebalance timeout: nothing ends the wait but the stop.
            return client.send_request(JoinGroupRequest(
                group_id="g", session_timeout_ms=600_000, rebalance_timeout_ms=2 ** 31 - 1, member_id=member_id,
                protocol_type="consumer", protocols=[P(name="range", metadata=b"")]), 1)

        join(first)
        _, joined = first.read_response(ApiKey.JOIN_GROUP, 1, timeout=10)
        assert joined.error_code == ErrorCode.NONE
        mark = broker.log_mark()
        join(second)            # a rebalance begins: it waits for the first member to rejoin
        broker.wait_for_log(r"Preparing to rebalance group g in state \w+ with old generation 1", after=mark)
        output = stop_within_bound(broker)
        _, waited = second.read_response(ApiKey.JOIN_GROUP, 1, timeout=5)
    assert waited.error_code == ErrorCode.NOT_COORDINATOR
    assert_clean(output)


# -- the fuzzer ---------------------------------------------------------------------------------------


def fuzz_then_stop(broker: BrokerProcess, corpus, *, rounds: int, connections: int, seed: int) -> None:
    sender = Sender({name: broker.port(name) for name in ("PLAINTEXT", "SASL_PLAINTEXT")}, concurrency=48)
    try:
        for number in range(rounds):
            fuzz_round(corpus, sender, connections, seed * 1000 + number)
            assert broker.running, broker.log_text()[-4000:]
            liveness(broker.data_port)
    finally:
        sender.stop()
    assert sender.stats.connections == rounds * connections and sender.stats.frames >= rounds * connections, \
        sender.stats
    output = stop_within_bound(broker)
    findings = scan_log(output)
    assert not findings, "\n---\n".join(findings[:5])


def test_fuzzing_then_sigterm(tmp_path):
    """The broker the clients were captured from (confluent-kafka only) is then fuzzed, briefly."""
    capturing = CaptureBroker(tmp_path)
    try:
        corpus = capturing.record(quick=True, log=lambda line: None)
        assert len(corpus.connections) >= 15 and len(corpus.api_keys()) >= 25, corpus.api_keys()
        fuzz_then_stop(capturing.broker, corpus, rounds=1, connections=300, seed=17)
    finally:
        capturing.broker.kill()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fuzzing_at_length_then_sigterm(tmp_path):
    """Every client of the capture (confluent-kafka, kafka-python, aiokafka): 24,000 plans (about 120,000
    frames; 3 minutes on a shared 2-core machine, more when it is busy) on a fresh broker."""
    corpus = capture(tmp_path / "capture", log=lambda line: None)
    assert len(corpus.connections) >= 25 and len(corpus.api_keys()) >= 28, corpus.api_keys()
    broker = BrokerProcess(tmp_path / "fuzzed", FUZZ_BROKER_OVERRIDES).start()
    try:
        fuzz_then_stop(broker, corpus, rounds=12, connections=2000, seed=23)
    finally:
        broker.kill()
