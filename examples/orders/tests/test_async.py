"""aiokafka in an asyncio test: the broker runs in its own process, so the test's event loop is its own."""

import pytest
from aiokafka import AIOKafkaProducer
from orders import Order, async_totals, encode


@pytest.mark.asyncio
async def test_aiokafka_producer_and_consumer(kafka_broker, kafka_topic):
    settings = kafka_broker.client_config("aiokafka")
    producer = AIOKafkaProducer(acks="all", enable_idempotence=True, **settings)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait(kafka_topic, encode(Order(f"order-{i}", f"c{i % 2}", 5)), key=b"c")
    finally:
        await producer.stop()
    totals = await async_totals(settings, kafka_topic, expected=10)
    assert totals == {"c0": 25, "c1": 25}
