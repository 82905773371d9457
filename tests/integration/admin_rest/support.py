"""Helpers of the admin REST endpoint's tests: treq on the real reactor, inside trial test cases.

The broker runs in its own process (``support/broker_process.py``); the
tests talk to its admin endpoint with treq (a real HTTP client over a real
socket) and to its Kafka listeners with real clients.  ``AdminRestTestCase``
is a trial ``TestCase``, so ``async def`` tests run on the reactor.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Any

import pytest
import treq
from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial import unittest

from support.broker_process import BrokerProcess

TOKEN = "admin-test-token"


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 10.0, what: str = "condition"):
    """Await ``check()`` until it returns a true value (polled on the reactor every 20 ms)."""
    deadline = monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value {value!r})")
        await deferLater(reactor, 0.02, lambda: None)


class Admin:
    """The admin endpoint of one broker, through treq (no connection pool: brokers restart)."""

    def __init__(self, broker: BrokerProcess, token: str | None = TOKEN, **treq_kwargs):
        self.broker = broker
        self.token = token
        self.treq_kwargs = treq_kwargs

    @property
    def url(self) -> str:
        assert self.broker.admin_url is not None, "the broker runs no admin endpoint"
        return self.broker.admin_url

    def headers(self, token: str | None) -> dict:
        return {"Authorization": [f"Bearer {token}"]} if token is not None else {}

    async def request(self, method: str, path: str, body: Any = None, *, token: Any = "default"):
        """(status, parsed JSON or text) of one call."""
        token = self.token if token == "default" else token
        headers = self.headers(token)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = ["application/json"]
        response = await treq.request(method, self.url + path, data=data, headers=headers, persistent=False,
                                      **self.treq_kwargs)
        content = await response.content()
        kind = response.headers.getRawHeaders("content-type", [""])[0]
        parsed = json.loads(content) if kind.startswith("application/json") else content.decode()
        return response.code, parsed

    async def get(self, path: str, **kwargs):
        status, body = await self.request("GET", path, **kwargs)
        assert status == 200, (path, status, body)
        return body

    async def listener(self, name: str = "PLAINTEXT", query: str = "") -> dict:
        doc = await self.get("/v1/connections" + query)
        return next(entry for entry in doc["listeners"] if entry["listener"] == name)


class AdminRestTestCase(unittest.TestCase):
    timeout = 120

    @pytest.fixture(autouse=True)
    def _fixtures(self, broker_factory, tmp_path):
        self.broker_factory = broker_factory
        self.tmp_path = tmp_path
