"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).

OffsetCommit is answered once the commit is in ``__consumer_offsets`` as
acks=all requires (the handler slot is given back while it waits), one
error per partition:

* a topic or partition the broker does not know: UNKNOWN_TOPIC_OR_PARTITION
  (the rest of the request is committed);
* the group's checks -- ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS; for a consumer-protocol group
  (KIP-848) the generation is the member epoch: STALE_MEMBER_EPOCH when it
  is not the member's current one, and the member must use v9+; from v9 a group that does not
  exist is GROUP_ID_NOT_FOUND for a commit naming a generation;
* metadata over ``offset.metadata.max.bytes``: OFFSET_METADATA_TOO_LARGE for
  that partition alone.

The commit time is the broker's clock; v2-v4's retention time, when set,
gives the offset its own expiry (stored with OffsetCommitValue v1).

OffsetFetch returns, per group, the committed offset, leader epoch and
metadata of each partition asked for (or of every partition with one when
the topics are null, v2+); -1 and "" where there is none.  With
``require_stable`` (v7+) a partition whose commit is still being written
answers UNSTABLE_OFFSET_COMMIT.  Layouts: v1 puts a group error on each
partition, v2-v7 at the top, v8+ (KIP-709) answers several groups, each with
its own error.  v9+ names the member and its epoch: a member of a
consumer-protocol group with another epoch is answered STALE_MEMBER_EPOCH.

OffsetDelete removes a group's offsets for partitions the group does not
consume from (GROUP_SUBSCRIBED_TO_TOPIC for those it does).

Authorization (Kafka's KafkaApis): OffsetCommit needs READ on the group and
on each topic, OffsetFetch DESCRIBE on the group and on each topic (a fetch
of every partition leaves out the topics the principal may not describe),
OffsetDelete DELETE on the group and READ on each topic; a refused group is
GROUP_AUTHORIZATION_FAILED, a refused topic TOPIC_AUTHORIZATION_FAILED for
its partitions.
"""

from __future__ import annotations

from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.coordinator.group.group import OffsetAndMetadata
from twisted_kafka.coordinator.group.results import OffsetFetchResult
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..authorization import GROUP, TOPIC, Authorization
from ..metadata_cache import MetadataCache

_NO_TIMESTAMP = -1


def _known(cache: MetadataCache, topic: str, partition: int) -> bool:
    return cache.partition(topic, partition) is not None


def _unreadable(handler: ApiHandler, request, topics) -> set[str]:
    """The topics among ``topics`` the request may not READ."""
    auth = handler.authorization
    if not auth.enabled:
        return set()
    names = {t.name for t in topics}
    return names - auth.allowed_names(request.context, AclOperation.READ, TOPIC, names)


def offsets_to_commit(handler: ApiHandler, cache: MetadataCache, request, now: int, *, with_leader_epoch: bool,
                      expire: int = _NO_TIMESTAMP):
    """The partitions of an OffsetCommit or TxnOffsetCommit: ``(errors, offsets)``, the refused ones
    with their error (READ on the topic, a partition the metadata knows) and the others' offsets."""
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    denied = _unreadable(handler, request, request.body.topics)
    for topic in request.body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name in denied:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not _known(cache, topic.name, p.partition_index):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetAndMetadata(
                    offset=p.committed_offset, metadata=p.committed_metadata or "", commit_timestamp=now,
                    leader_epoch=p.committed_leader_epoch if with_leader_epoch else -1, expire_timestamp=expire)
    return errors, offsets


class OffsetCommitHandler(ApiHandler):
    api_key = ApiKey.OFFSET_COMMIT
    group_operation = AclOperation.READ

    def __init__(self, coordinator: GroupCoordinator, metadata_cache: MetadataCache, clock, *,
                 authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator
        self.cache = metadata_cache
        self.clock = clock

    async def handle(self, request):
        body = request.body
        version = request.api_version
        now = int(self.clock.seconds() * 1000)
        retention = body.retention_time_ms if 2 <= version <= 4 else -1
        expire = now + retention if retention != -1 else _NO_TIMESTAMP
        errors, offsets = offsets_to_commit(self, self.cache, request, now, with_leader_epoch=version >= 6,
                                            expire=expire)
        if offsets:
            d = self.coordinator.commit_offsets(body.group_id, body.member_id,
                                                body.group_instance_id if version >= 7 else None,
                                                body.generation_id_or_member_epoch, offsets, api_version=version)
            if not d.called:
                request.mark_local_complete()
            errors.update(await d)
        return self._response(request, lambda tp: errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))

    @staticmethod
    def _response(request, error_of):
        R = m.OffsetCommitResponse
        return R(throttle_time_ms=0, topics=[
            R.OffsetCommitResponseTopic(name=topic.name, partitions=[
                R.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=error_of((topic.name, p.partition_index)))
                for p in topic.partitions])
            for topic in request.body.topics])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return self._response(request, lambda tp: error)


class OffsetFetchHandler(ApiHandler):
    api_key = ApiKey.OFFSET_FETCH

    def __init__(self, coordinator: GroupCoordinator, *, authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator

    @staticmethod
    def _groups(request) -> list[tuple[str, list[tuple[str, int]] | None]]:
        body = request.body
        if request.api_version >= 8:
            return [(g.group_id, None if g.topics is None else
                     [(t.name, i) for t in g.topics for i in t.partition_indexes]) for g in body.groups]
        topics = body.topics
        return [(body.group_id, None if topics is None else [(t.name, i) for t in topics for i in t.partition_indexes])]

    async def handle(self, request):
        version = request.api_version
        require_stable = version >= 7 and request.body.require_stable
        results: list[tuple] = []
        auth = self.authorization
        for index, (group_id, partitions) in enumerate(self._groups(request)):
            if auth.enabled and not auth.allowed(request.context, AclOperation.DESCRIBE, GROUP, group_id):
                results.append((group_id, partitions, ErrorCode.GROUP_AUTHORIZATION_FAILED, {}))
                continue
            error, offsets = self.coordinator.fetch_offsets(group_id, require_stable, partitions)
            if version >= 9 and not error:
                # A consumer-protocol member fetches with its member id and epoch (KIP-848).
                group = request.body.groups[index]
                error = self.coordinator.validate_consumer_offset_fetch(group_id, group.member_id, group.member_epoch)
                if error:
                    offsets = {}
            if auth.enabled and not error:
                partitions, offsets = self._describable(request, partitions, offsets)
            results.append((group_id, partitions, error, offsets))
        return self._response(version, results)

    def _describable(self, request, partitions, offsets):
        """Refuse (asked for by name) or leave out (every partition) the topics the request may not DESCRIBE."""
        names = {t for t, _ in (partitions if partitions is not None else offsets)}
        allowed = self.authorization.allowed_names(request.context, AclOperation.DESCRIBE, TOPIC, names)
        if partitions is None:
            return None, {tp: r for tp, r in offsets.items() if tp[0] in allowed}
        refused = OffsetFetchResult(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        return partitions, {tp: (offsets.get(tp, OffsetFetchResult()) if tp[0] in allowed else refused)
                            for tp in partitions}

    @staticmethod
    def _by_topic(partitions, offsets: dict[tuple[str, int], OffsetFetchResult]):
        order = partitions if partitions is not None else sorted(offsets)
        by_topic: dict[str, list[tuple[int, OffsetFetchResult]]] = {}
        for topic, index in order:
            by_topic.setdefault(topic, []).append((index, offsets.get((topic, index), OffsetFetchResult())))
        return by_topic

    def _response(self, version: int, results):
        R = m.OffsetFetchResponse
        if version >= 8:
            G = R.OffsetFetchResponseGroup
            T = G.OffsetFetchResponseTopics
            P = T.OffsetFetchResponsePartitions
            groups = []
            for group_id, partitions, error, offsets in results:
                topics = [] if error else [
                    T(name=topic, partitions=[P(partition_index=i, committed_offset=r.offset,
                                                committed_leader_epoch=r.leader_epoch, metadata=r.metadata,
                                                error_code=r.error) for i, r in entries])
                    for topic, entries in self._by_topic(partitions, offsets).items()]
                groups.append(G(group_id=group_id, topics=topics, error_code=error))
            return R(throttle_time_ms=0, groups=groups)
        T1 = R.OffsetFetchResponseTopic
        P1 = T1.OffsetFetchResponsePartition
        ((_, partitions, error, offsets),) = results
        if error and version < 2:
            # v1 has no top-level error: every partition asked for carries it.
            offsets = {tp: OffsetFetchResult(error=error) for tp in partitions or ()}
        elif error:
            partitions, offsets = [], {}
        topics = [T1(name=topic, partitions=[P1(partition_index=i, committed_offset=r.offset,
                                                committed_leader_epoch=r.leader_epoch, metadata=r.metadata,
                                                error_code=r.error) for i, r in entries])
                  for topic, entries in self._by_topic(partitions, offsets).items()]
        return R(throttle_time_ms=0, topics=topics, error_code=error)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return self._response(request.api_version,
                              [(group_id, partitions, error, {}) for group_id, partitions in self._groups(request)])


class OffsetDeleteHandler(ApiHandler):
    api_key = ApiKey.OFFSET_DELETE
    group_operation = AclOperation.DELETE

    def __init__(self, coordinator: GroupCoordinator, metadata_cache: MetadataCache, *,
                 authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator
        self.cache = metadata_cache

    async def handle(self, request):
        body = request.body
        errors: dict[tuple[str, int], ErrorCode] = {}
        wanted = []
        denied = _unreadable(self, request, body.topics)
        for topic in body.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if topic.name in denied:
                    errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif _known(self.cache, *tp):
                    wanted.append(tp)
                else:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        d = self.coordinator.delete_offsets(body.group_id, wanted)
        if not d.called:
            request.mark_local_complete()
        group_error, partition_errors = await d
        if group_error is not ErrorCode.NONE:
            return self.error_response(request, group_error)
        errors.update(partition_errors)
        R = m.OffsetDeleteResponse
        return R(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
            R.OffsetDeleteResponseTopic(name=topic.name, partitions=[
                R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index,
                    error_code=errors.get((topic.name, p.partition_index), ErrorCode.NONE))
                for p in topic.partitions])
            for topic in body.topics])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
