"""``TransactionRefusals``: one line per refusal, at most ``burst`` per interval, the rest summed up."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.logger import LogLevel, formatEvent, globalLogPublisher

from twisted_kafka.coordinator.transaction import TransactionRefusals
from twisted_kafka.network.request import RequestContext

CONTEXT = RequestContext(connection_id="c1", listener_name="PLAINTEXT", security_protocol="PLAINTEXT", plane="data",
                         client_host="127.0.0.1", client_port=50000, client_id="app-1")


def logged_lines(action) -> list[str]:
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    try:
        action()
    finally:
        globalLogPublisher.removeObserver(events.append)
    return [formatEvent(e) for e in events
            if e.get("log_namespace") == "twisted_kafka.coordinator.TransactionRefusals"
            and e["log_level"] == LogLevel.warn]


def test_a_refusal_names_the_client_its_address_the_ids_and_the_reason():
    refusals = TransactionRefusals(Clock())
    (line,) = logged_lines(lambda: refusals.refused("FindCoordinator", CONTEXT, ["tx-1", "tx-2", "tx-3"]))
    assert line == ("FindCoordinator refused for transactional id 'tx-1' (and 2 more) from client 'app-1' at "
                    "127.0.0.1:50000 on PLAINTEXT: Transactions are not supported by this broker "
                    "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)")


def test_a_flood_is_logged_as_a_burst_and_one_summary_per_interval():
    clock = Clock()
    refusals = TransactionRefusals(clock, burst=3, interval=60)

    def flood(n: int) -> None:
        for _ in range(n):
            refusals.refused("InitProducerId", CONTEXT, ["tx"])

    lines = logged_lines(lambda: flood(100))
    assert len(lines) == 3 and all("InitProducerId refused" in line for line in lines)
    lines = logged_lines(lambda: clock.advance(59.9))
    assert lines == []
    lines = logged_lines(lambda: clock.advance(0.1))
    assert lines == ["97 more transactional request(s) refused in the last 60s without a line each: "
                     "Transactions are not supported by this broker"]
    assert clock.getDelayedCalls() == []
    lines = logged_lines(lambda: flood(2))           # a new interval: a new burst
    assert len(lines) == 2 and refusals.refusals == 102
    assert clock.getDelayedCalls() == []             # nothing was left unlogged
