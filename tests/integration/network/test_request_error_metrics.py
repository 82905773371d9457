"""``kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=<Api>,error=<ERROR>`` in ``/metrics``.

As Kafka's ``RequestChannel.updateErrorMetrics``: every response counts
each error code it carries (``AbstractResponse.errorCounts``), NONE
included -- a CreateTopics of an existing topic counts TOPIC_ALREADY_EXISTS
although the request as a whole succeeded, a Produce to a missing topic
counts UNKNOWN_TOPIC_OR_PARTITION per partition.  Exported as the counter
``kafka_network_requestmetrics_errorspersec_total{request, error}``.
"""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.raw_client import RawClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .test_controller_apis import create_topic, produce_one

pytestmark = pytest.mark.integration

BROKER_OVERRIDES = {"auto.create.topics.enable": "false"}


def errors_per_sec(broker) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    family = families.get("kafka_network_requestmetrics_errorspersec")
    assert family is not None and family.type == "counter", sorted(families)
    return {(s.labels["request"], s.labels["error"]): s.value for s in family.samples if s.name.endswith("_total")}


def test_each_error_code_of_each_response_is_counted(module_broker):
    port = module_broker.data_port
    assert create_topic(port, "counted") == ErrorCode.NONE
    assert create_topic(port, "counted") == ErrorCode.TOPIC_ALREADY_EXISTS
    assert create_topic(port, "counted") == ErrorCode.TOPIC_ALREADY_EXISTS
    assert produce_one(port, "missing") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with RawClient(port) as client:                  # two partitions of a missing topic: two errors
        P = m.ProduceRequest
        body = client.request(P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name="missing", partition_data=[
                P.TopicProduceData.PartitionProduceData(index=i, records=None) for i in (0, 1)])]), 7)
        assert [p.error_code for p in body.responses[0].partition_responses] == [3, 3]
        assert client.api_versions(3).error_code == ErrorCode.NONE
        metadata = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)
                                                            for name in ("counted", "missing")],
                                                    allow_auto_topic_creation=False), 4)
        assert [t.error_code for t in metadata.topics] == [0, 3]
    counted = errors_per_sec(module_broker)
    assert counted[("CreateTopics", "TOPIC_ALREADY_EXISTS")] == 2
    assert counted[("CreateTopics", "NONE")] == 1
    assert counted[("Produce", "UNKNOWN_TOPIC_OR_PARTITION")] == 3
    assert ("Produce", "NONE") not in counted
    assert counted[("ApiVersions", "NONE")] >= 1          # every response counts, errors or not
    # Metadata (encoded from cached parts): the topic, its partition, and the missing topic.
    assert counted[("Metadata", "UNKNOWN_TOPIC_OR_PARTITION")] == 1
    assert counted[("Metadata", "NONE")] >= 2
