"""Orders: published to Kafka keyed by customer, totalled per customer by a consumer group."""

from .events import Order, decode, encode
from .publisher import OrderPublisher
from .totals import TotalsWorker, async_totals, run_until

__all__ = ["Order", "encode", "decode", "OrderPublisher", "TotalsWorker", "async_totals", "run_until"]
