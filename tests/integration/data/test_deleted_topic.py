"""The data path after DeleteTopics (confluent-kafka AdminClient).

A Produce or Fetch naming a deleted topic is answered
UNKNOWN_TOPIC_OR_PARTITION for that topic only; a topic created again under
the same name is a new topic (new id, offsets from 0, none of the old data).
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from support.raw_client import RawClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.builder import build_batch

from .helpers import fetch_request, produce_request
from .test_confluent_roundtrip import advertised_keys

CREATE_TOPICS, DELETE_TOPICS = 19, 20


def topic_id(client: RawClient, topic: str):
    response = client.request(m.MetadataRequest(
        version=12, topics=[m.MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False), 12)
    (entry,) = response.topics
    return entry.error_code, entry.topic_id


def test_produce_and_fetch_of_a_deleted_topic(broker):
    assert {CREATE_TOPICS, DELETE_TOPICS} <= advertised_keys(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("doomed", 2), NewTopic("survivor", 1)]).values():
        future.result(10)
    with RawClient(broker.data_port) as client:
        _, old_id = topic_id(client, "doomed")
        response = client.request(produce_request({"doomed": {0: build_batch([(None, b"old")])},
                                                   "survivor": {0: build_batch([(None, b"s0")])}}))
        assert {(t.name, p.error_code, p.base_offset) for t in response.responses
                for p in t.partition_responses} == {("doomed", 0, 0), ("survivor", 0, 0)}

        admin.delete_topics(["doomed"])["doomed"].result(10)

        response = client.request(produce_request({"doomed": {0: build_batch([(None, b"late")]),
                                                              1: build_batch([(None, b"late")])},
                                                   "survivor": {0: build_batch([(None, b"s1")])}}))
        assert sorted((t.name, p.index, p.error_code, p.base_offset) for t in response.responses
                      for p in t.partition_responses) == [
            ("doomed", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
            ("doomed", 1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
            ("survivor", 0, 0, 1)]
        fetch = client.request(fetch_request({"doomed": {0: 0}, "survivor": {0: 0}}))
        errors = {(t.topic, p.partition_index): p.error_code for t in fetch.responses for p in t.partitions}
        assert errors == {("doomed", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("survivor", 0): 0}
        assert topic_id(client, "doomed")[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        # The same name again: a new topic, starting empty at offset 0.
        admin.create_topics([NewTopic("doomed", 1)])["doomed"].result(10)
        error, new_id = topic_id(client, "doomed")
        assert error == 0 and new_id != old_id
        response = client.request(produce_request({"doomed": {0: build_batch([(None, b"new")])}}))
        assert response.responses[0].partition_responses[0].base_offset == 0
        fetch = client.request(fetch_request({"doomed": {0: 0}}))
        part = fetch.responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 1
