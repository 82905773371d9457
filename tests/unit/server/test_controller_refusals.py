"""Every controller API authorizes its sender first, and a refusal of who the sender is closes the connection.

The five controller APIs -- LeaderAndIsr, UpdateMetadata, StopReplica (to brokers), AlterPartition and
ControlledShutdown (to the controller) -- are served by ``ControllerApiHandler``s: with an authorizer the
principal needs CLUSTER_ACTION on the cluster or must be the broker's own inter-broker principal, checked
before anything of the request is read; a refusal for the principal, the controller, the target or an
epoch is answered, logged once, and the answer is a ``CloseConnectionResponse`` (reason
``controller_refused``).  Other errors (NOT_CONTROLLER) keep the connection.  (Black-box, over an mTLS
control plane: tests/integration/security/test_controller_refusals.py.)
"""

from __future__ import annotations

import pytest
from twisted.logger import globalLogPublisher

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.request import CloseConnectionResponse, SendResponse
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import CONTROLLER_API_KEYS, ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType
from twisted_kafka.server.api_handler import ApiHandler
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.controller_requests import ControllerApiHandler
from twisted_kafka.server.kafka_apis import KafkaApis

from .helpers import BROKER_EPOCH, BROKER_ID, decode
from .test_authorization import allow, grant
from .test_controller_authorization import ADMIN, BROKER, MALLORY, OPERATOR, metadata, secured

R = m.AlterPartitionRequest


@pytest.fixture
def warnings():
    events: list = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def refusals(events) -> list:
    return [e for e in events if str(e.get("log_format", "")).startswith("Refused {api}")]


def alter_partition(node, isr, *, broker_epoch=BROKER_EPOCH):
    partition = node.replica_manager.partition("t", 0)
    return R(broker_id=BROKER_ID, broker_epoch=broker_epoch, topics=[R.TopicData(topic_name="t", partitions=[
        R.TopicData.PartitionData(partition_index=0, leader_epoch=partition.leader_epoch, new_isr=list(isr),
                                  leader_recovery_state=0, partition_epoch=partition.partition_epoch)])])


def handle(node, request, version, principal):
    req, response = node.handle(request, version, plane="control", listener="CONTROLLER", principal=principal)
    return decode(req, response), response


def isr(node) -> list[int]:
    return list(node.controller.topics["t"].partitions[0].isr)


def test_every_controller_api_is_served_by_a_controller_api_handler(tmp_path):
    node = secured(tmp_path)
    served = {key: node.apis._handlers[key] for key in CONTROLLER_API_KEYS}
    assert all(isinstance(handler, ControllerApiHandler) for handler in served.values()), served


def test_a_plain_handler_cannot_serve_a_controller_api():
    class Unguarded(ApiHandler):
        api_key = ApiKey.ALTER_PARTITION

        async def handle(self, request):
            return None

        def error_response(self, request, error, message=None):
            return None

    with pytest.raises(TypeError, match="ControllerApiHandler"):
        KafkaApis([Unguarded()], authorization=ALLOW_ALL)


def test_alter_partition_from_another_principal_is_refused_before_the_controller_sees_it(tmp_path, warnings):
    node = secured(tmp_path)
    node.create_topic("t")
    body, response = handle(node, alter_partition(node, []), 1, MALLORY)
    assert body.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and body.topics == []
    assert isinstance(response, CloseConnectionResponse) and response.graceful
    assert response.reason == CloseReason.CONTROLLER_REFUSED
    assert isr(node) == [BROKER_ID], "nothing reached the controller"
    [refusal] = refusals(warnings)
    assert (refusal["api"], refusal["principal"], refusal["code"]) == (
        "AlterPartition v1", MALLORY, "CLUSTER_AUTHORIZATION_FAILED")
    assert refusal["source"] == "127.0.0.1:50000 on listener CONTROLLER"


@pytest.mark.parametrize("principal", [BROKER, ADMIN, OPERATOR])
def test_alter_partition_from_the_broker_a_super_user_or_cluster_action_is_served(tmp_path, principal):
    node = secured(tmp_path)
    grant(node, allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION, principal=OPERATOR))
    node.create_topic("t")
    body, response = handle(node, alter_partition(node, [BROKER_ID]), 1, principal)
    assert isinstance(response, SendResponse)
    assert body.error_code == ErrorCode.NONE and body.topics[0].partitions[0].error_code == ErrorCode.NONE


def test_alter_partition_with_another_broker_epoch_is_answered_then_the_connection_closed(tmp_path, warnings):
    node = secured(tmp_path)
    node.create_topic("t")
    body, response = handle(node, alter_partition(node, [], broker_epoch=BROKER_EPOCH + 12345), 1, BROKER)
    assert body.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert isinstance(response, CloseConnectionResponse) and response.reason == CloseReason.CONTROLLER_REFUSED
    assert isr(node) == [BROKER_ID]
    [refusal] = refusals(warnings)
    assert (refusal["api"], refusal["principal"], refusal["code"]) == ("AlterPartition v1", BROKER,
                                                                       "STALE_BROKER_EPOCH")


def test_controlled_shutdown_follows_the_same_rule(tmp_path):
    node = secured(tmp_path)
    request = m.ControlledShutdownRequest(broker_id=BROKER_ID, broker_epoch=BROKER_EPOCH)
    body, response = handle(node, request, 3, MALLORY)
    assert body.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and isinstance(response, CloseConnectionResponse)
    body, response = handle(node, m.ControlledShutdownRequest(broker_id=BROKER_ID, broker_epoch=BROKER_EPOCH + 1), 3,
                            BROKER)
    assert body.error_code == ErrorCode.STALE_BROKER_EPOCH and isinstance(response, CloseConnectionResponse)
    body, response = handle(node, m.ControlledShutdownRequest(broker_id=7, broker_epoch=BROKER_EPOCH), 3, BROKER)
    assert body.error_code == ErrorCode.BROKER_NOT_AVAILABLE and isinstance(response, CloseConnectionResponse)
    body, response = handle(node, request, 3, BROKER)
    assert body.error_code == ErrorCode.NONE and isinstance(response, SendResponse)


def test_the_guards_refusals_close_too_and_an_accepted_request_does_not(tmp_path):
    node = secured(tmp_path)
    stale = metadata(node)
    stale.broker_epoch += 1
    body, response = handle(node, stale, 8, BROKER)
    assert body.error_code == ErrorCode.STALE_BROKER_EPOCH and isinstance(response, CloseConnectionResponse)
    body, response = handle(node, metadata(node), 8, MALLORY)
    assert body.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and isinstance(response, CloseConnectionResponse)
    body, response = handle(node, metadata(node), 8, BROKER)
    assert body.error_code == ErrorCode.NONE and isinstance(response, SendResponse)


def test_not_controller_is_not_a_refusal_of_the_sender(tmp_path):
    """A broker that is not the controller answers NOT_CONTROLLER and keeps the connection: the sender is
    a broker that has not yet learnt where the controller moved."""
    from twisted_kafka.controller.client import NoControllerClient
    from twisted_kafka.server.handlers.alter_partition import AlterPartitionHandler

    node = secured(tmp_path)
    node.create_topic("t")
    apis = KafkaApis([AlterPartitionHandler(NoControllerClient(), node.guard)], authorization=ALLOW_ALL)
    from .helpers import make_request, result_of

    request = make_request(alter_partition(node, []), 1, plane="control", listener="CONTROLLER", principal=BROKER)
    response = result_of(apis.handle(request))
    assert isinstance(response, SendResponse)
    assert decode(request, response).error_code == ErrorCode.NOT_CONTROLLER
