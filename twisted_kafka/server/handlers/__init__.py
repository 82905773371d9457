"""API handlers, one module per API family; ``build_handlers`` lists what the broker serves.

The list is the whole truth about served APIs: KafkaApis dispatches to these
and ApiVersions advertises exactly their keys, so an API is advertised the
moment its handler exists and never before.
"""

from __future__ import annotations


def build_handlers(server) -> list:
    from .alter_configs import AlterConfigsHandler, IncrementalAlterConfigsHandler
    from .api_versions import ApiVersionsHandler
    from .controller_apis import (
        ControlledShutdownHandler,
        LeaderAndIsrHandler,
        StopReplicaHandler,
        UpdateMetadataHandler,
    )
    from .create_partitions import CreatePartitionsHandler
    from .create_topics import CreateTopicsHandler
    from .delete_records import DeleteRecordsHandler
    from .delete_topics import DeleteTopicsHandler
    from .describe_cluster import DescribeClusterHandler
    from .describe_configs import DescribeConfigsHandler
    from .fetch import FetchHandler
    from .list_offsets import ListOffsetsHandler
    from .metadata import MetadataHandler
    from .offset_for_leader_epoch import OffsetForLeaderEpochHandler
    from .produce import ProduceHandler

    return [
        ApiVersionsHandler(server.apis),
        MetadataHandler(server),
        ProduceHandler(server),
        FetchHandler(server),
        ListOffsetsHandler(server),
        OffsetForLeaderEpochHandler(server),
        LeaderAndIsrHandler(server),
        UpdateMetadataHandler(server),
        StopReplicaHandler(server),
        ControlledShutdownHandler(server),
        CreateTopicsHandler(server),
        DeleteTopicsHandler(server),
        CreatePartitionsHandler(server),
        DeleteRecordsHandler(server),
        DescribeConfigsHandler(server),
        AlterConfigsHandler(server),
        IncrementalAlterConfigsHandler(server),
        DescribeClusterHandler(server),
    ]
