"""An order event and its JSON form on the topic."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    amount_cents: int


def encode(order: Order) -> bytes:
    return json.dumps(asdict(order), sort_keys=True).encode()


def decode(value: bytes) -> Order:
    return Order(**json.loads(value))
