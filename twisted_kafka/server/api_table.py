"""The broker's API table: every handler, built with exactly the collaborators it uses.

The list is the whole truth about served APIs: ``KafkaApis`` dispatches to
these and ApiVersions advertises exactly their keys (filtered per plane), so
an API is advertised the moment its handler exists and never before.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.coordinator.group.service import GroupCoordinatorService
from twisted_kafka.coordinator.transaction import ProducerIdManager, TransactionRefusals
from twisted_kafka.network.request import RequestContext
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore, ScramCredentialStore

from .admin_manager import AdminManager
from .api_handler import ApiHandler
from .authorization import ALLOW_ALL, Authorization
from .config_repository import ConfigRepository
from .controller_requests import ControllerRequestGuard
from .dynamic_config import DynamicBrokerConfig
from .handlers.acls import CreateAclsHandler, DeleteAclsHandler, DescribeAclsHandler
from .handlers.alter_configs import AlterConfigsHandler, IncrementalAlterConfigsHandler
from .handlers.api_versions import ApiVersionsHandler
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
from .handlers.client_quotas import AlterClientQuotasHandler, DescribeClientQuotasHandler
from .handlers.describe_cluster import DescribeClusterHandler
from .handlers.describe_configs import DescribeConfigsHandler
from .handlers.describe_log_dirs import DescribeLogDirsHandler
from .handlers.alter_partition import AlterPartitionHandler
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
from .metadata_cache import MetadataCache
from .replica_manager import ReplicaManager


def broker_handlers(*, advertised_keys: Callable[[RequestContext], list[int]], replica_manager: ReplicaManager,
                    metadata_cache: MetadataCache, admin_manager: AdminManager, config_repository: ConfigRepository,
                    dynamic_config: DynamicBrokerConfig, controller: ControllerClient,
                    controller_guard: ControllerRequestGuard, group_coordinator: GroupCoordinator,
                    offsets_topic: GroupCoordinatorService, producer_ids: ProducerIdManager, clock,
                    authorization: Authorization = ALLOW_ALL,
                    scram_store: ScramCredentialStore | None = None) -> list[ApiHandler]:
    """Every handler, each holding ``authorization`` (what its requests may do).  Without
    ``scram_store`` SCRAM credentials live in memory only (tests that do not care about them); the
    broker passes its ``FileScramCredentialStore`` (``ZkScramCredentialStore`` in a cluster)."""
    if scram_store is None:
        scram_store = InMemoryScramCredentialStore()
    handlers = _handlers(advertised_keys=advertised_keys, replica_manager=replica_manager,
                         metadata_cache=metadata_cache, admin_manager=admin_manager,
                         config_repository=config_repository, dynamic_config=dynamic_config, controller=controller,
                         controller_guard=controller_guard, group_coordinator=group_coordinator,
                         offsets_topic=offsets_topic, producer_ids=producer_ids, clock=clock,
                         authorization=authorization, scram_store=scram_store)
    for handler in handlers:
        handler.authorization = authorization
    return handlers


def _handlers(*, advertised_keys, replica_manager, metadata_cache, admin_manager, config_repository,
              dynamic_config, controller, controller_guard, group_coordinator, offsets_topic, producer_ids, clock,
              authorization, scram_store) -> list[ApiHandler]:
    groups = group_coordinator
    refusals = TransactionRefusals(clock)
    return [
        ApiVersionsHandler(advertised_keys),
        MetadataHandler(metadata_cache, admin_manager, dynamic_config),
        ProduceHandler(replica_manager),
        InitProducerIdHandler(producer_ids, refusals),
        FetchHandler(replica_manager, metadata_cache, dynamic_config),
        ListOffsetsHandler(replica_manager),
        OffsetForLeaderEpochHandler(replica_manager),
        LeaderAndIsrHandler(replica_manager, controller_guard),
        UpdateMetadataHandler(replica_manager, metadata_cache, config_repository, dynamic_config, controller_guard,
                              authorization),
        StopReplicaHandler(replica_manager, controller_guard),
        ControlledShutdownHandler(controller, controller_guard),
        AlterPartitionHandler(controller, controller_guard),
        CreateTopicsHandler(admin_manager),
        DeleteTopicsHandler(admin_manager, dynamic_config),
        CreatePartitionsHandler(admin_manager),
        DeleteRecordsHandler(replica_manager),
        DescribeConfigsHandler(admin_manager),
        AlterConfigsHandler(admin_manager),
        IncrementalAlterConfigsHandler(admin_manager),
        DescribeClusterHandler(metadata_cache),
        DescribeLogDirsHandler(replica_manager),
        DescribeClientQuotasHandler(admin_manager),
        AlterClientQuotasHandler(admin_manager),
        FindCoordinatorHandler(offsets_topic, metadata_cache, refusals),
        JoinGroupHandler(groups),
        SyncGroupHandler(groups),
        HeartbeatHandler(groups),
        LeaveGroupHandler(groups),
        OffsetCommitHandler(groups, metadata_cache, clock),
        OffsetFetchHandler(groups),
        OffsetDeleteHandler(groups, metadata_cache),
        DescribeGroupsHandler(groups),
        ListGroupsHandler(groups),
        DeleteGroupsHandler(groups),
        ElectLeadersHandler(admin_manager),
        AlterPartitionReassignmentsHandler(admin_manager),
        ListPartitionReassignmentsHandler(admin_manager),
        DescribeAclsHandler(),
        CreateAclsHandler(controller),
        DeleteAclsHandler(controller),
        SaslHandshakeHandler(),
        SaslAuthenticateHandler(),
        DescribeUserScramCredentialsHandler(scram_store),
        AlterUserScramCredentialsHandler(scram_store),
    ]


__all__ = ["broker_handlers"]
