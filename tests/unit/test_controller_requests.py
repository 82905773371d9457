"""ControllerRequestGuard and broker epochs: which controller requests a broker applies.

(Black-box: tests/integration/network/test_controller_apis.py.)
"""

from __future__ import annotations

import pytest

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.broker_epoch import BrokerEpoch
from twisted_kafka.server.controller_requests import (
    BROKER_EPOCH_RANDOM_BITS,
    ControllerRequestGuard,
    new_broker_epoch,
)

EPOCH = new_broker_epoch()


def guard(controller: int | None = 0) -> ControllerRequestGuard:
    return ControllerRequestGuard(broker_id=0, cluster_id="cluster-a", broker_epoch=BrokerEpoch(EPOCH),
                                  known_controller=lambda: controller)


def update_metadata(*, controller_id=0, controller_epoch=3, broker_epoch=EPOCH, **tags):
    return m.UpdateMetadataRequest(version=8, controller_id=controller_id, is_k_raft_controller=False,
                                   controller_epoch=controller_epoch, broker_epoch=broker_epoch, topic_states=[],
                                   live_brokers=[], **tags)


def refusal(g: ControllerRequestGuard, body) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        g.check(body)
    return raised.value.code


def test_the_controllers_request_for_this_broker_moves_the_epoch():
    g = guard()
    g.check(update_metadata(broker_id=0, cluster_id="cluster-a"))
    assert g.controller_epoch == 3
    g.check(update_metadata(controller_epoch=3))           # the same epoch again; tags absent: unchecked
    assert refusal(g, update_metadata(controller_epoch=2)) == ErrorCode.STALE_CONTROLLER_EPOCH


@pytest.mark.parametrize("body, code", [
    (update_metadata(cluster_id="cluster-b"), ErrorCode.INCONSISTENT_CLUSTER_ID),
    (update_metadata(broker_id=1), ErrorCode.INVALID_REQUEST),
    (update_metadata(controller_id=1), ErrorCode.STALE_CONTROLLER_EPOCH),
    (update_metadata(broker_epoch=EPOCH + 1), ErrorCode.STALE_BROKER_EPOCH),
    (update_metadata(broker_epoch=EPOCH - 1), ErrorCode.STALE_BROKER_EPOCH),
    (update_metadata(broker_epoch=-1), ErrorCode.STALE_BROKER_EPOCH),
])
def test_refused_requests_leave_the_controller_epoch_alone(body, code):
    g = guard()
    body.controller_epoch = 1_000_000
    assert refusal(g, body) == code
    assert g.controller_epoch == -1
    g.check(update_metadata(controller_epoch=1))             # the real controller is not locked out


def test_no_known_controller_refuses_everything():
    assert refusal(guard(controller=None), update_metadata()) == ErrorCode.STALE_CONTROLLER_EPOCH


def test_broker_epochs_grow_across_restarts_and_have_random_low_bits():
    random_max = (1 << BROKER_EPOCH_RANDOM_BITS) - 1
    assert new_broker_epoch(1_000_016, 0) > new_broker_epoch(1_000_000, random_max)   # 16 ms later
    assert new_broker_epoch(1_000_000, 5) & random_max == 5
    assert 0 < new_broker_epoch(4_398_046_511_103, random_max) < 2 ** 63               # 2109: still an int64
    assert len({new_broker_epoch(1_000_000) for _ in range(20)}) > 1
