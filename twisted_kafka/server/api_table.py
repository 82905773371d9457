"""The broker's API table: every handler, built with exactly the collaborators it uses.

The list is the whole truth about served APIs: ``KafkaApis`` dispatches to
these and ApiVersions advertises exactly their keys (filtered per plane), so
an API is advertised the moment its handler exists and never before.  A
handler that checks resources itself (per topic, per group) is given the
broker's ``Authorization`` here, when it is made; the whole-request checks
an API declares are made by ``KafkaApis`` with the same one.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.coordinator.group.service import GroupCoordinatorService
from twisted_kafka.coordinator.transaction import ProducerIdManager
from twisted_kafka.coordinator.transaction.service import TransactionCoordinatorService
from twisted_kafka.network.request import RequestContext
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore, ScramCredentialStore

from .admin_manager import AdminManager
from .api_handler import ApiHandler
from .authorization import Authorization
from .config_repository import ConfigRepository
from .controller_requests import ControllerRequestGuard
from .dynamic_config import DynamicBrokerConfig
from .handlers.acls import CreateAclsHandler, DeleteAclsHandler, DescribeAclsHandler
from .handlers.alter_configs import AlterConfigsHandler, IncrementalAlterConfigsHandler
from .handlers.alter_partition import AlterPartitionHandler
from .handlers.api_versions import ApiVersionsHandler
from .handlers.client_quotas import AlterClientQuotasHandler, DescribeClientQuotasHandler
from .handlers.consumer_group import ConsumerGroupDescribeHandler, ConsumerGroupHeartbeatHandler
from .handlers.controller_apis import (
    ControlledShutdownHandler,
    LeaderAndIsrHandler,
    StopReplicaHandler,
    UpdateMetadataHandler,
)
from .handlers.create_partitions import CreatePartitionsHandler
from .handlers.create_topics import CreateTopicsHandler
from .handlers.delete_records import DeleteRecordsHandler
from .handlers.delete_topics import DeleteTopicsHandler
from .handlers.describe_cluster import DescribeClusterHandler
from .handlers.describe_configs import DescribeConfigsHandler
from .handlers.describe_log_dirs import DescribeLogDirsHandler
from .handlers.describe_producers import DescribeProducersHandler
from .handlers.elect_leaders import ElectLeadersHandler
from .handlers.fetch import FetchHandler
from .handlers.find_coordinator import FindCoordinatorHandler
from .handlers.group import HeartbeatHandler, JoinGroupHandler, LeaveGroupHandler, SyncGroupHandler
from .handlers.group_admin import DeleteGroupsHandler, DescribeGroupsHandler, ListGroupsHandler
from .handlers.init_producer_id import InitProducerIdHandler
from .handlers.list_offsets import ListOffsetsHandler
from .handlers.metadata import MetadataHandler
from .handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from .handlers.offsets import OffsetCommitHandler, OffsetDeleteHandler, OffsetFetchHandler
from .handlers.produce import ProduceHandler
from .handlers.reassignments import AlterPartitionReassignmentsHandler, ListPartitionReassignmentsHandler
from .handlers.sasl import SaslAuthenticateHandler, SaslHandshakeHandler
from .handlers.scram_credentials import AlterUserScramCredentialsHandler, DescribeUserScramCredentialsHandler
from .handlers.transaction_admin import DescribeTransactionsHandler, ListTransactionsHandler
from .handlers.transactions import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    TxnOffsetCommitHandler,
)
from .handlers.write_txn_markers import WriteTxnMarkersHandler
from .metadata_cache import MetadataCache
from .replica_manager import ReplicaManager


def broker_handlers(*, advertised_keys: Callable[[RequestContext], list[int]], replica_manager: ReplicaManager,
                    metadata_cache: MetadataCache, admin_manager: AdminManager, config_repository: ConfigRepository,
                    dynamic_config: DynamicBrokerConfig, controller: ControllerClient,
                    controller_guard: ControllerRequestGuard, group_coordinator: GroupCoordinator,
                    offsets_topic: GroupCoordinatorService, transactions: TransactionCoordinatorService,
                    producer_ids: ProducerIdManager, clock,
                    authorization: Authorization, scram_store: ScramCredentialStore | None = None
                    ) -> list[ApiHandler]:
    """Every handler.  Without ``scram_store`` SCRAM credentials live in memory only (tests that do not
    care about them); the broker passes its ``FileScramCredentialStore`` (``ZkScramCredentialStore`` in a
    cluster)."""
    if scram_store is None:
        scram_store = InMemoryScramCredentialStore()
    groups = group_coordinator
    txn = transactions.coordinator
    auth = authorization
    # The consumer rebalance protocol (KIP-848) is served only while group.coordinator.rebalance.protocols
    # includes "consumer".
    consumer_protocol: list[ApiHandler] = [
        ConsumerGroupHeartbeatHandler(groups), ConsumerGroupDescribeHandler(groups, authorization=auth),
    ] if groups is None or groups.consumer.config.enabled else []
    return consumer_protocol + [
        ApiVersionsHandler(advertised_keys),
        MetadataHandler(metadata_cache, admin_manager, dynamic_config, authorization=auth),
        ProduceHandler(replica_manager, authorization=auth),
        InitProducerIdHandler(producer_ids, txn, authorization=auth),
        AddPartitionsToTxnHandler(txn, metadata_cache, authorization=auth),
        AddOffsetsToTxnHandler(txn, groups, authorization=auth),
        EndTxnHandler(txn, authorization=auth),
        WriteTxnMarkersHandler(transactions.marker_writer, controller_guard, authorization=auth),
        TxnOffsetCommitHandler(groups, metadata_cache, clock, authorization=auth),
        DescribeProducersHandler(replica_manager, authorization=auth),
        DescribeTransactionsHandler(txn, authorization=auth),
        ListTransactionsHandler(txn, authorization=auth),
        FetchHandler(replica_manager, metadata_cache, dynamic_config, authorization=auth, clock=clock),
        ListOffsetsHandler(replica_manager, authorization=auth),
        OffsetForLeaderEpochHandler(replica_manager, authorization=auth),
        LeaderAndIsrHandler(replica_manager, controller_guard),
        UpdateMetadataHandler(replica_manager, metadata_cache, config_repository, dynamic_config, controller_guard,
                              authorization),
        StopReplicaHandler(replica_manager, controller_guard),
        ControlledShutdownHandler(controller, controller_guard),
        AlterPartitionHandler(controller, controller_guard),
        CreateTopicsHandler(admin_manager, authorization=auth),
        DeleteTopicsHandler(admin_manager, dynamic_config, authorization=auth),
        CreatePartitionsHandler(admin_manager, authorization=auth),
        DeleteRecordsHandler(replica_manager, authorization=auth),
        DescribeConfigsHandler(admin_manager, authorization=auth),
        AlterConfigsHandler(admin_manager, authorization=auth),
        IncrementalAlterConfigsHandler(admin_manager, authorization=auth),
        DescribeClusterHandler(metadata_cache, authorization=auth),
        DescribeLogDirsHandler(replica_manager),
        DescribeClientQuotasHandler(admin_manager),
        AlterClientQuotasHandler(admin_manager),
        FindCoordinatorHandler(offsets_topic, transactions, metadata_cache, authorization=auth),
        JoinGroupHandler(groups),
        SyncGroupHandler(groups),
        HeartbeatHandler(groups),
        LeaveGroupHandler(groups),
        OffsetCommitHandler(groups, metadata_cache, clock, authorization=auth),
        OffsetFetchHandler(groups, authorization=auth),
        OffsetDeleteHandler(groups, metadata_cache, authorization=auth),
        DescribeGroupsHandler(groups, authorization=auth),
        ListGroupsHandler(groups, authorization=auth),
        DeleteGroupsHandler(groups, authorization=auth),
        ElectLeadersHandler(admin_manager),
        AlterPartitionReassignmentsHandler(admin_manager),
        ListPartitionReassignmentsHandler(admin_manager),
        DescribeAclsHandler(authorization=auth),
        CreateAclsHandler(controller, authorization=auth),
        DeleteAclsHandler(controller, authorization=auth),
        SaslHandshakeHandler(),
        SaslAuthenticateHandler(),
        DescribeUserScramCredentialsHandler(scram_store),
        AlterUserScramCredentialsHandler(scram_store),
    ]


__all__ = ["broker_handlers"]
