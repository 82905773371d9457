"""Every test here must leave no failed Deferred unhandled: an error nobody sees is a bug in the client."""

from __future__ import annotations

import gc

import pytest
from twisted.logger import formatEvent, globalLogPublisher


@pytest.fixture(autouse=True)
def no_unhandled_errors():
    events: list = []
    globalLogPublisher.addObserver(events.append)
    yield
    gc.collect()    # unhandled Deferred failures are reported when the Deferred is collected
    globalLogPublisher.removeObserver(events.append)
    unhandled = [formatEvent(e) for e in events if "Unhandled error in Deferred" in formatEvent(e)]
    assert not unhandled, unhandled
