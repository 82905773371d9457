"""DescribeCluster (60): brokers on the request's listener, cluster id, controller; endpoint types."""

from __future__ import annotations

import pytest

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.server.metadata_cache import CLUSTER_AUTHORIZED_OPERATIONS

from .helpers import CLUSTER_ID

D = m.DescribeClusterRequest
NOT_REQUESTED = None           # Kafka's INT32 min, decoded by kafka-python as None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_brokers_cluster_and_controller(node, version):
    body = node.call(D(include_cluster_authorized_operations=False), version)
    assert (body.error_code, body.error_message, body.cluster_id, body.controller_id) == (
        ErrorCode.NONE, None, CLUSTER_ID, 0)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in body.brokers] == [(0, "127.0.0.1", 9092, None)]
    assert body.authorized_operations is NOT_REQUESTED
    if version >= 2:
        assert [b.is_fenced for b in body.brokers] == [False]
    control = node.call(D(include_cluster_authorized_operations=False), version, plane="control",
                        listener="CONTROLLER")
    assert [b.port for b in control.brokers] == [9093]


def test_authorized_operations_when_asked(node):
    body = node.call(D(include_cluster_authorized_operations=True), 1)
    assert set(body.authorized_operations) == CLUSTER_AUTHORIZED_OPERATIONS


@pytest.mark.parametrize(("endpoint_type", "error"), [(2, ErrorCode.MISMATCHED_ENDPOINT_TYPE),
                                                      (7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)])
def test_only_broker_endpoints_are_described(node, endpoint_type, error):
    body = node.call(D(endpoint_type=endpoint_type), 1)
    assert (body.error_code, body.brokers, body.controller_id) == (error, [], -1)
    assert body.error_message
