"""A SASL_SSL broker (certificates made on the fly, SCRAM users): clients need the right settings."""

import time

import pytest
from confluent_kafka import Producer
from orders import Order, OrderPublisher, decode

from .helpers import read_back

pytestmark = pytest.mark.kafka_broker(security="SASL_SSL")


def test_orders_go_through_tls_and_scram(kafka_broker, kafka_client_config, kafka_topic):
    assert kafka_client_config["security.protocol"] == "SASL_SSL"
    assert kafka_client_config["sasl.mechanism"] == "SCRAM-SHA-512"
    orders = [Order(f"order-{i}", "grace", i) for i in range(5)]
    OrderPublisher(kafka_client_config, kafka_topic).publish(orders)
    assert [decode(m.value()) for m in read_back(kafka_client_config, kafka_topic, 1, 5)] == orders


def test_a_wrong_password_is_refused(kafka_client_config, kafka_topic):
    errors = []
    producer = Producer({**kafka_client_config, "sasl.password": "not-the-password",
                         "error_cb": errors.append, "message.timeout.ms": 5000})
    producer.produce(kafka_topic, b"refused")
    deadline = time.monotonic() + 30
    while not any("Authentication failed" in error.str() for error in errors) and time.monotonic() < deadline:
        producer.poll(0.1)
    assert any("Authentication failed" in error.str() for error in errors), [e.str() for e in errors]


@pytest.mark.asyncio
async def test_aiokafka_with_sasl_plain(kafka_broker, kafka_topic):
    from aiokafka import AIOKafkaProducer

    settings = {**kafka_broker.client_config("aiokafka"), "sasl_mechanism": "PLAIN"}
    producer = AIOKafkaProducer(acks="all", **settings)
    await producer.start()
    try:
        metadata = await producer.send_and_wait(kafka_topic, b"over SASL_SSL with PLAIN")
    finally:
        await producer.stop()
    assert metadata.offset == 0
