"""An acks=all producer in a background thread that records when each value was sent and acknowledged.

Used by the replication tests and bench/cluster.py to check that no acknowledged record is lost and to
time a leader failover (kill to the first acknowledgement of a record sent after it).
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

__all__ = ["BackgroundProducer"]


class BackgroundProducer:
    """An acks=all producer sending numbered values until stopped; records when each was sent and acked.

    ``idempotent``: ``enable.idempotence`` (KIP-98), so a batch retried across a failover is written once;
    without it a retried batch may be written twice (no acknowledged value is lost either way).
    """

    def __init__(self, bootstrap: str, topic: str, *, idempotent: bool = False):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                  "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                                  "enable.idempotence": idempotent,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.topic = topic
        self.sent_at: dict[bytes, float] = {}
        self.acked: dict[bytes, float] = {}
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err, msg):
        if err is None:
            self.acked[msg.value()] = time.monotonic()
        else:
            self.failed.append(str(err))

    def _run(self):
        i = 0
        while not self._stop.is_set():
            value = f"m{i}".encode()
            self.sent_at[value] = time.monotonic()
            try:
                self.producer.produce(self.topic, value, callback=self._report)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(60)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def first_ack_of_a_value_sent_after(self, moment: float) -> float | None:
        times = [acked for value, acked in list(self.acked.items()) if self.sent_at.get(value, 0) > moment]
        return min(times) if times else None
