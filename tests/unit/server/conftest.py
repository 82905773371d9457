"""Fixtures of the server unit tests (see ``helpers``).

The fixture is called ``node``: ``broker`` is the suite's real broker process.
"""

from __future__ import annotations

import pytest

from .helpers import Broker


@pytest.fixture
def node(tmp_path) -> Broker:
    """A started single-node broker: logs on ``tmp_path``, its controller on an in-memory control plane."""
    return Broker(tmp_path)
