"""Transactional producers are refused at once, with a reason, and the broker says so in its log.

Transactions are not built.  A producer with a transactional id first asks
FindCoordinator (key type 1) for its transaction coordinator, then
InitProducerId with the id; both are answered with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the message "Transactions are not
supported by this broker", because it is the one code every client treats
as final at that step (librdkafka raises anything else only when
``init_transactions()`` times out -- up to twice ``transaction.timeout.ms``).
Each refusal is logged once, naming the client id, its address, the
transactional id and the reason; a client that keeps asking cannot flood
the log.

The bound of 5 s below is a correctness bound (the clients' own timeouts are
30 s and more), not a latency figure.
"""

from __future__ import annotations

import asyncio
import re
import time

import confluent_kafka
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TransactionalIdAuthorizationFailed
from kafka import KafkaProducer
from kafka.errors import TransactionalIdAuthorizationFailedError

from support.raw_client import RawClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

PROMPT = 5.0            # seconds: far below any client timeout
REASON = "Transactions are not supported by this broker"


def refusal_line(broker, transactional_id: str, client_id: str, *, after: int) -> str:
    pattern = (rf"transactional id '{re.escape(transactional_id)}' .*client '{re.escape(client_id)}' "
               rf"at 127\.0\.0\.1:\d+.*{REASON}")
    return broker.wait_for_log(pattern, after=after)


def test_confluent_kafka_init_transactions_fails_at_once(data_broker):
    mark = data_broker.log_mark()
    producer = confluent_kafka.Producer({"bootstrap.servers": data_broker.bootstrap, "transactional.id": "tx-ck",
                                         "client.id": "ck-txn", "log_level": 0})
    start = time.monotonic()
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        producer.init_transactions(30)
    elapsed = time.monotonic() - start
    error = raised.value.args[0]
    assert elapsed < PROMPT, f"init_transactions() took {elapsed:.1f}s"
    assert error.code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert error.fatal() and not error.retriable()
    assert REASON in error.str()
    refusal_line(data_broker, "tx-ck", "ck-txn", after=mark)


def test_kafka_python_init_transactions_fails_at_once(data_broker):
    mark = data_broker.log_mark()
    producer = KafkaProducer(bootstrap_servers=data_broker.bootstrap, transactional_id="tx-kp",
                             client_id="kp-txn", max_block_ms=30_000)
    try:
        start = time.monotonic()
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
        elapsed = time.monotonic() - start
        assert elapsed < PROMPT, f"init_transactions() took {elapsed:.1f}s"
    finally:
        producer.close(timeout=5)
    refusal_line(data_broker, "tx-kp", "kp-txn", after=mark)


def test_aiokafka_start_fails_at_once(data_broker):
    mark = data_broker.log_mark()

    async def start() -> float:
        producer = AIOKafkaProducer(bootstrap_servers=data_broker.bootstrap, transactional_id="tx-aio",
                                    client_id="aio-txn")
        began = time.monotonic()
        try:
            with pytest.raises(TransactionalIdAuthorizationFailed):
                await asyncio.wait_for(producer.start(), 30)
            return time.monotonic() - began
        finally:
            await producer.stop()

    elapsed = asyncio.run(start())
    assert elapsed < PROMPT, f"start() took {elapsed:.1f}s"
    refusal_line(data_broker, "tx-aio", "aio-txn", after=mark)


def test_every_version_is_refused_with_the_reason(data_broker):
    """FindCoordinator v1-v3 (one key, with its message) and v4+ (each key), InitProducerId v0-v4."""
    mark = data_broker.log_mark()
    with RawClient(data_broker.data_port) as client:
        for version in (1, 3):
            body = client.request(m.FindCoordinatorRequest(version=version, key="raw-a", key_type=1), version)
            assert (body.error_code, body.node_id, body.error_message) == (
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, REASON + ".")
        body = client.request(m.FindCoordinatorRequest(version=4, key_type=1, coordinator_keys=["raw-b", "raw-c"]), 4)
        assert [(c.key, c.error_code, c.node_id, c.error_message) for c in body.coordinators] == [
            (key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, REASON + ".") for key in ("raw-b", "raw-c")]
        for version in (0, 4):
            body = client.request(m.InitProducerIdRequest(version=version, transactional_id="raw-d",
                                                          transaction_timeout_ms=60_000, producer_id=-1,
                                                          producer_epoch=-1), version)
            assert (body.error_code, body.producer_id, body.producer_epoch) == (
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
        # An idempotent producer (no transactional id) is served as before.
        body = client.request(m.InitProducerIdRequest(version=4, transactional_id=None, transaction_timeout_ms=60_000,
                                                      producer_id=-1, producer_epoch=-1), 4)
        assert body.error_code == ErrorCode.NONE and body.producer_id >= 0
    for key in ("raw-a", "raw-b", "raw-d"):
        refusal_line(data_broker, key, "raw-client", after=mark)


def test_a_client_that_keeps_asking_cannot_flood_the_log(data_broker):
    mark = data_broker.log_mark()
    with RawClient(data_broker.data_port) as client:
        for i in range(200):
            body = client.request(m.FindCoordinatorRequest(version=3, key=f"flood-{i}", key_type=1), 3)
            assert body.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # Still answered, and still served: the connection is the same one.
        assert client.request(m.FindCoordinatorRequest(version=3, key="g", key_type=0), 3).error_code == 0
    refusal_line(data_broker, "flood-0", "raw-client", after=mark)
    logged = re.findall(r"transactional id 'flood-\d+'", data_broker.log_text()[mark:])
    assert 1 <= len(logged) <= 20, f"{len(logged)} refusal lines for 200 refusals"
