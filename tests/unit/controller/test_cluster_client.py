"""ClusterControllerClient without ZooKeeper: what it does locally, and what it refuses to pass on."""

from __future__ import annotations

import pytest

from support.inline import InlineReactor
from twisted_kafka.config import KafkaConfig
from twisted_kafka.controller.client import FORWARDED_SUFFIX, NoControllerClient, forwarded, forwarding_client_id
from twisted_kafka.controller.cluster_client import ClusterControllerClient
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import run


class Inactive(NoControllerClient):
    """This broker's controller, not active."""


def client(known_controller=2) -> ClusterControllerClient:
    config = KafkaConfig.from_props({"controlled.shutdown.max.retries": "1"})
    return ClusterControllerClient(config=config, broker_id=1, admin=None, view=None, local=Inactive(),
                                   known_controller=lambda: known_controller, reactor=InlineReactor())


def test_the_forwarding_mark():
    assert forwarding_client_id(3) == "broker-3" + FORWARDED_SUFFIX
    assert forwarded(forwarding_client_id(3)) and not forwarded("rdkafka") and not forwarded(None)


@pytest.mark.parametrize("call", [
    lambda c: c.controlled_shutdown(5, 7),          # another broker's shutdown, received here
    lambda c: c.elect_leaders(0, None, timeout_ms=100, forward=False),
    lambda c: c.alter_partition_reassignments({}, forward=False),
    lambda c: c.list_partition_reassignments(None, forward=False),
])
def test_a_request_from_another_broker_is_never_passed_on(call):
    """The broker that is not the controller answers NOT_CONTROLLER instead of forwarding again."""
    with pytest.raises(KafkaError) as info:
        run(call(client()))
    assert info.value.code == ErrorCode.NOT_CONTROLLER


def test_without_a_controller_nothing_is_sent():
    with pytest.raises(KafkaError) as info:
        run(client(known_controller=None).elect_leaders(0, None, timeout_ms=100))
    assert info.value.code == ErrorCode.NOT_CONTROLLER
    assert client().controller_id == 2
