"""Request/response message classes, one pair per API key.

The message layouts come from kafka-python 3.0.12 (``kafka.protocol``), whose
classes are generated from Apache Kafka's own JSON message definitions and
compile a decoder/encoder per (message, version); docs/architecture.md records
why the project depends on it rather than generating its own. The four
ZooKeeper-mode controller APIs (and AlterPartition) and the KIP-848 consumer group APIs
(ConsumerGroupHeartbeat, ConsumerGroupDescribe) kafka-python does not ship are defined by this
project's schema files in ``schemas/`` and loaded through the same machinery
(``load_json=``), so every message -- client-facing or inter-broker -- is the
same kind of object with the same encode/decode entry points.

Handlers build responses with these classes, e.g.
``ProduceResponse(version=v, responses=[...], throttle_time_ms=0)``; nested
structs are available as class attributes (``ProduceResponse.TopicProduceResponse``)
or may be given as tuples in wire order.
"""

from __future__ import annotations

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from . import schemas as _schemas

# --- controller APIs (our schema files) -----------------------------------------
#
# kafka-python's ApiMessage takes ``load_json`` in its ``__init_subclass__``; the
# package has no type information, and mypy checks the keyword against
# ``object.__init_subclass__`` anyway: hence the ``type: ignore[call-arg]`` below.

def _expose_type_as_request_type(cls, json):
    """Rename the top-level ``Type`` field to ``RequestType`` (attribute ``request_type``).

    kafka-python's message classes use the class attribute ``type`` to tell
    requests from responses (header choice, response registry); a field named
    ``type`` would replace it with a slot. The wire layout is unchanged; only
    the Python attribute name differs from Kafka's field name.
    """
    for field in json["fields"]:
        if field["name"] == "Type":
            field["name"] = "RequestType"
    return json


class LeaderAndIsrRequest(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """Controller -> broker: partition leadership and ISR (api key 4).

    Kafka's ``Type`` field (v5+: 0 unknown, 1 incremental, 2 full) is
    ``request_type`` here.
    """

    json_patch = classmethod(_expose_type_as_request_type)


class LeaderAndIsrResponse(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    pass


class StopReplicaRequest(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """Controller -> broker: stop (and maybe delete) replicas (api key 5)."""


class StopReplicaResponse(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    pass


class UpdateMetadataRequest(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """Controller -> broker: cluster metadata for the broker's cache (api key 6).

    Kafka's tagged ``Type`` field (v8+) is ``request_type`` here.
    """

    json_patch = classmethod(_expose_type_as_request_type)


class UpdateMetadataResponse(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    pass


class ControlledShutdownRequest(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """Broker -> controller: move leadership away before shutting down (api key 7)."""


class ControlledShutdownResponse(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    pass


class AlterPartitionRequest(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """Partition leader -> controller: a new ISR (api key 56, KIP-497)."""


class AlterPartitionResponse(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """Consumer group member -> coordinator: join, heartbeat, leave (api key 68, KIP-848)."""


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """Describe consumer groups of the consumer rebalance protocol (api key 69, KIP-848)."""


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_schemas):  # type: ignore[call-arg]
    """A group's ``authorized_operations`` is a set of operation codes, encoded as Kafka's bitfield
    (as kafka-python does for DescribeGroups)."""

    @classmethod
    def json_patch(cls, json):
        for field in json["fields"][1]["fields"]:
            if field["name"] == "AuthorizedOperations":
                field["type"] = "bitfield"
        return json


#: api_key -> (request class, response class), for every API this codec can carry.
MESSAGE_CLASSES: dict[int, tuple[type[ApiMessage], type[ApiMessage]]] = {
    cls.API_KEY: (cls, resp) for cls, resp in (
        (ProduceRequest, ProduceResponse),
        (FetchRequest, FetchResponse),
        (ListOffsetsRequest, ListOffsetsResponse),
        (MetadataRequest, MetadataResponse),
        (LeaderAndIsrRequest, LeaderAndIsrResponse),
        (StopReplicaRequest, StopReplicaResponse),
        (UpdateMetadataRequest, UpdateMetadataResponse),
        (ControlledShutdownRequest, ControlledShutdownResponse),
        (OffsetCommitRequest, OffsetCommitResponse),
        (OffsetFetchRequest, OffsetFetchResponse),
        (FindCoordinatorRequest, FindCoordinatorResponse),
        (JoinGroupRequest, JoinGroupResponse),
        (HeartbeatRequest, HeartbeatResponse),
        (LeaveGroupRequest, LeaveGroupResponse),
        (SyncGroupRequest, SyncGroupResponse),
        (DescribeGroupsRequest, DescribeGroupsResponse),
        (ListGroupsRequest, ListGroupsResponse),
        (SaslHandshakeRequest, SaslHandshakeResponse),
        (ApiVersionsRequest, ApiVersionsResponse),
        (CreateTopicsRequest, CreateTopicsResponse),
        (DeleteTopicsRequest, DeleteTopicsResponse),
        (DeleteRecordsRequest, DeleteRecordsResponse),
        (InitProducerIdRequest, InitProducerIdResponse),
        (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
        (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
        (EndTxnRequest, EndTxnResponse),
        (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
        (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
        (DescribeAclsRequest, DescribeAclsResponse),
        (CreateAclsRequest, CreateAclsResponse),
        (DeleteAclsRequest, DeleteAclsResponse),
        (DescribeConfigsRequest, DescribeConfigsResponse),
        (AlterConfigsRequest, AlterConfigsResponse),
        (DescribeLogDirsRequest, DescribeLogDirsResponse),
        (SaslAuthenticateRequest, SaslAuthenticateResponse),
        (CreatePartitionsRequest, CreatePartitionsResponse),
        (DeleteGroupsRequest, DeleteGroupsResponse),
        (OffsetDeleteRequest, OffsetDeleteResponse),
        (ElectLeadersRequest, ElectLeadersResponse),
        (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
        (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
        (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
        (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
        (AlterClientQuotasRequest, AlterClientQuotasResponse),
        (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
        (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
        (DescribeClusterRequest, DescribeClusterResponse),
        (AlterPartitionRequest, AlterPartitionResponse),
        (DescribeProducersRequest, DescribeProducersResponse),
        (DescribeTransactionsRequest, DescribeTransactionsResponse),
        (ListTransactionsRequest, ListTransactionsResponse),
        (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
        (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    )
}

__all__ = sorted(
    [cls.__name__ for pair in MESSAGE_CLASSES.values() for cls in pair]
    + ["ApiMessage", "MESSAGE_CLASSES"]
)
