"""The group coordinator: consumer groups (the classic protocol) and committed offsets.

Modules, from the bottom up:

* ``records``   -- ``__consumer_offsets`` key/value schemas (Kafka's on-disk format);
* ``topic``     -- the offsets topic: name, group -> partition, configs;
* ``config``    -- ``GroupConfig`` / ``OffsetConfig`` from the broker keys;
* ``state``     -- the group states and their transitions;
* ``member``    -- one member;
* ``group``     -- one group: members, protocol, generation, offsets;
* ``results``   -- what the coordinator answers;
* ``delayed``   -- delayed operations on the reactor clock (joins, heartbeats, syncs);
* ``loader``    -- replaying an offsets partition;
* ``writer``    -- appending to an offsets partition with acks=all;
* ``manager``   -- the groups of the partitions this broker leads, their writes and loads;
* ``coordinator`` -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets, admin operations;
* ``service``   -- the coordinator as a broker service (leadership, offsets topic, expiry).
"""

from .config import GroupConfig, OffsetConfig
from .coordinator import GroupCoordinator
from .group import GroupMetadata, OffsetAndMetadata
from .results import JoinGroupResult, LeaveGroupResult, SyncGroupResult
from .state import GroupState
from .topic import OFFSETS_TOPIC, partition_for

__all__ = ["GroupConfig", "OffsetConfig", "GroupCoordinator", "GroupMetadata", "OffsetAndMetadata",
           "JoinGroupResult", "LeaveGroupResult", "SyncGroupResult", "GroupState", "OFFSETS_TOPIC",
           "partition_for"]
