"""Consumer groups (KIP-848) rebuilt from the records a loaded offsets partition holds.

A group exists while its ``ConsumerGroupMetadata`` record does; its members
are those with a ``ConsumerGroupMemberMetadata`` record, each with its
current assignment (``ConsumerGroupCurrentMemberAssignment``) and target
(``ConsumerGroupTargetAssignmentMember``).  Records of a member without
metadata (a member whose tombstones were only partly written) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator

from twisted.logger import Logger

from twisted_kafka.protocol.exceptions import ProtocolDecodeError

from .consumer_group import ConsumerGroup
from .consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    decode_current_assignment_value,
    decode_epoch_value,
    decode_member_metadata_value,
    decode_partition_metadata_value,
    decode_target_member_value,
)
from .loader import LoadedPartition

log = Logger(namespace="twisted_kafka.coordinator.group.consumer_load")


def consumer_groups_of(loaded: LoadedPartition) -> Iterator[ConsumerGroup]:
    by_group: dict[str, dict] = {}
    for key, value in loaded.consumer_records.items():
        by_group.setdefault(key.group, {})[(key.kind, key.member)] = value
    for group_id, records in by_group.items():
        if (GROUP_METADATA, None) not in records:
            continue
        try:
            yield _group(group_id, records)
        except ProtocolDecodeError as exc:
            log.error("Consumer group {group} cannot be loaded: {error}", group=group_id, error=exc)


def _group(group_id: str, records: dict) -> ConsumerGroup:
    group = ConsumerGroup(group_id)
    group.group_epoch = decode_epoch_value(records[(GROUP_METADATA, None)])
    if (TARGET_METADATA, None) in records:
        group.assignment_epoch = decode_epoch_value(records[(TARGET_METADATA, None)])
    if (PARTITION_METADATA, None) in records:
        group.subscription_metadata = {t.name: t for t in decode_partition_metadata_value(
            records[(PARTITION_METADATA, None)])}
    for (kind, member_id), value in records.items():
        if kind != MEMBER_METADATA:
            continue
        member = decode_member_metadata_value(member_id, value)
        current = records.get((CURRENT_ASSIGNMENT, member_id))
        if current is not None:
            state = decode_current_assignment_value(current)
            member = member.evolve(member_epoch=state.member_epoch, previous_member_epoch=state.previous_member_epoch,
                                   state=state.state, assigned=state.assigned,
                                   pending_revocation=state.pending_revocation)
        group.put_member(member)
        if member.server_assignor is not None:
            group.assignor_name = member.server_assignor
        target = records.get((TARGET_MEMBER, member_id))
        if target is not None:
            group.target[member_id] = decode_target_member_value(target)
    return group
