"""Loading a partition directory at start-up, and recovering it after a crash.

Steps (Kafka's ``LogLoader``):

1. Remove leftovers: ``*.deleted`` (segments whose delayed deletion was cut
   short), ``*.tmp`` (half-written checkpoints), ``*.cleaned`` (unfinished
   compaction output), and index files whose ``.log`` is gone; complete a
   compaction swap a crash interrupted after its commit point (``*.swap``
   files replace the segments they cover) or abandon one interrupted before
   it (``_complete_swaps``, Kafka's rules).
2. Open every segment.  An index that is missing or fails its sanity check
   (size not a multiple of the entry size, entries out of order, positions
   beyond the file; every entry is checked on the last segment, the first and
   last on the others) is rebuilt by recovering that segment.
3. Unclean shutdown (no ``.kafka_cleanshutdown`` marker): every segment from
   the one holding the recovery point to the end is recovered — each batch's
   framing, CRC, codec and offsets are checked, indexes are rebuilt, and the
   file is cut after the last good batch *at or above the recovery point*
   (what a crash can leave unwritten); segments after a cut are deleted,
   because the log must stay contiguous.  Recovered batches feed the
   leader-epoch cache, so epochs written after the last flush come back.
4. Data below the recovery point was flushed: damage there came later, from
   outside, and is never a reason to cut the log.  Its bytes are kept and
   recorded as ``DamagedRange``s (in ``damaged-ranges``, so they survive
   restarts): fetches of those offsets fail with CORRUPT_MESSAGE, every
   other offset — in that segment and all later ones — reads as before.
5. Segments not recovered (all of them after a clean shutdown) are only
   checked cheaply: batch headers are walked from the last index entry to
   the end of the file (no CRC), which also yields the log end offset.  A
   segment whose walk does not end exactly at the end of its file is
   checked batch by batch (4.).  After an unclean shutdown ``LogManager``
   CRC-checks the segments below the recovery point in the background.
6. A damaged ``leader-epoch-checkpoint`` is discarded and the cache rebuilt
   from the batches' partition leader epochs (every header is walked); a
   damaged ``partition.metadata`` is discarded (the controller's topic id is
   written when the partition is assigned).
7. Log start offset = max(checkpoint, first segment's base); the epoch cache
   is cut to [log start, log end).  The recovery point is *not* advanced by
   recovery: recovered bytes may still be only in the page cache.
8. Idempotent and transactional producers' state is loaded from the newest
   usable ``<offset>.snapshot`` and the batches after it are replayed (after
   a crash with no snapshot: from the log start) — Kafka's
   ``rebuildProducerState``, see ``producer_state``.  Open transactions come
   back with it.  The transaction index (``.txnindex``) of every recovered
   segment, and of any whose file fails its check or names offsets past its
   segment's end, is rebuilt by that replay, which then starts at or before
   the first such segment (Kafka's ``LogSegment.recover`` replaying the
   producer state).

BLOCKING: run in the thread pool (``LogManager`` does, in parallel up to
``num.recovery.threads.per.data.dir`` per directory).
"""

from __future__ import annotations

import contextlib
import os

from twisted.logger import Logger

from twisted_kafka.log.batches import BATCH_HEADER_SIZE, InvalidRecordBatch, parse_batch_header
from twisted_kafka.log.checkpoints import (
    CheckpointError,
    read_damaged_ranges,
    read_partition_metadata,
)
from twisted_kafka.log.epoch_cache import LeaderEpochCache
from twisted_kafka.log.file_handles import FileHandleCache
from twisted_kafka.log.layout import (
    CLEANED_SUFFIX,
    DAMAGED_RANGES,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    fsync_dir,
    parse_partition_dir,
    parse_segment_file,
    segment_file_name,
)
from twisted_kafka.log.log import Log, SegmentDeleter, wall_clock_ms
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.producer_state import ProducerStateConfig, ProducerStateManager
from twisted_kafka.log.segment import DamagedRange, LogSegment

log = Logger()


class RecoveryStats:
    """What loading found, for logs and tests."""

    def __init__(self) -> None:
        self.segments_recovered = 0
        self.bytes_truncated = 0
        self.indexes_rebuilt = 0
        self.segments_deleted = 0

    def __repr__(self) -> str:
        return (f"<RecoveryStats recovered={self.segments_recovered} "
                f"truncated={self.bytes_truncated} rebuilt={self.indexes_rebuilt} "
                f"deleted={self.segments_deleted}>")


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _swap_end_offset(path: str) -> int | None:
    """The offset after the last whole batch of the segment file ``path`` (None: no batch).

    Only headers are read (the file was fsynced before it was named ``.swap``)."""
    end = None
    with open(path, "rb", buffering=0) as f:
        pos = 0
        while True:
            head = os.pread(f.fileno(), BATCH_HEADER_SIZE, pos)
            if len(head) < BATCH_HEADER_SIZE:
                return end
            try:
                header = parse_batch_header(head, 0)
            except InvalidRecordBatch:
                return end
            end = header.next_offset
            pos += header.size


def _complete_swaps(dir: str, names: list[str]) -> list[str]:
    """Finish or abandon a compaction swap a crash interrupted (Kafka's ``LogLoader``).

    The cleaner writes ``<base>.log.cleaned`` (and its indexes), fsyncs it,
    renames it ``.swap`` -- the ``.log`` last --, renames the segments it replaces
    ``.deleted`` and finally drops the ``.swap`` suffix (``Log.replace_segments``).
    So a ``.log.swap`` file is complete and its data replaces every segment whose
    base offset falls in [its base, its end): those are removed and the ``.swap``
    files take their final names.  Any ``.cleaned`` file is unfinished output and
    is removed, with every ``.swap`` file at or above the lowest ``.cleaned`` base
    (a swap whose commit point was never reached: its segments are all still
    there).  Returns the names left in the directory.
    """
    cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX)]
    swaps = [n for n in names if n.endswith(SWAP_SUFFIX)]
    if not cleaned and not swaps:
        return names
    min_cleaned = min((p[0] for p in map(parse_segment_file, cleaned) if p is not None), default=None)
    for name in cleaned:
        log.warn("{dir}: removing unfinished compaction output {name}", dir=dir, name=name)
        _remove(os.path.join(dir, name))
    valid = []
    for name in swaps:
        parsed = parse_segment_file(name)
        if parsed is None or (min_cleaned is not None and parsed[0] >= min_cleaned):
            log.warn("{dir}: removing {name}: its swap never reached its commit point", dir=dir, name=name)
            _remove(os.path.join(dir, name))
        else:
            valid.append((parsed, name))
    ranges = []
    for (base, kind, _), name in valid:
        if kind == "log":
            end = _swap_end_offset(os.path.join(dir, name))
            ranges.append((base, base + 1 if end is None else end))
    for name in os.listdir(dir):
        parsed = parse_segment_file(name)
        if parsed is None or parsed[2] == SWAP_SUFFIX:
            continue
        if any(low <= parsed[0] < high for low, high in ranges):
            log.info("{dir}: removing {name}, replaced by compacted data before a crash", dir=dir, name=name)
            _remove(os.path.join(dir, name))
    for _, name in valid:
        log.info("{dir}: completing the interrupted swap of compacted segment {name}", dir=dir, name=name)
        os.rename(os.path.join(dir, name), os.path.join(dir, name[:-len(SWAP_SUFFIX)]))
    fsync_dir(dir)
    return os.listdir(dir)


def _clean_leftovers(dir: str) -> list[int]:
    """Delete files recovery must not see, complete interrupted compaction swaps; return
    the base offsets of ``.log`` files."""
    names = os.listdir(dir)
    for name in names:
        if name.endswith(TMP_SUFFIX) or name.endswith(DELETED_SUFFIX):
            _remove(os.path.join(dir, name))
    names = _complete_swaps(dir, [n for n in names if not n.endswith((TMP_SUFFIX, DELETED_SUFFIX))])
    logs = set()
    indexes: list[tuple[int, str]] = []
    for name in names:
        path = os.path.join(dir, name)
        parsed = parse_segment_file(name)
        if parsed is None:
            continue
        base, kind, _ = parsed
        if kind == "log":
            logs.add(base)
        else:
            indexes.append((base, path))
    for base, path in indexes:
        if base not in logs:
            log.info("removing orphaned index {path}", path=path)
            _remove(path)
    return sorted(logs)


def load_log(dir: str, config: LogConfig, *, topic: str | None = None,
             partition: int | None = None, topic_id=None, recovery_point: int = 0,
             log_start_offset: int = 0, had_clean_shutdown: bool = False,
             now_ms: int | None = None, segment_deleter: SegmentDeleter | None = None,
             stats: RecoveryStats | None = None,
             producer_state_config: ProducerStateConfig | None = None,
             files: FileHandleCache) -> Log:
    """Open (creating if needed) and, after an unclean shutdown, recover the log in ``dir``;
    its files are opened through ``files`` (the log manager's descriptor cache)."""
    now_ms = wall_clock_ms() if now_ms is None else now_ms
    stats = stats if stats is not None else RecoveryStats()
    if topic is None or partition is None:
        parsed = parse_partition_dir(os.path.basename(os.path.normpath(dir)))
        if parsed is None:
            raise ValueError(f"{dir} is not a partition directory")
        topic, partition = parsed
    os.makedirs(dir, exist_ok=True)
    if topic_id is None:
        try:
            topic_id = read_partition_metadata(os.path.join(dir, PARTITION_METADATA))
        except CheckpointError as e:
            log.warn("discarding the damaged {e}; it is written again with the topic id the "
                     "controller knows", e=e)
    rewrite_damage = False
    try:
        known_damage = read_damaged_ranges(os.path.join(dir, DAMAGED_RANGES))
    except CheckpointError as e:
        log.warn("discarding the damaged {e}; damaged data is found again when its segment is "
                 "checked", e=e)
        known_damage = {}
        rewrite_damage = True
    epoch_cache = LeaderEpochCache.load(os.path.join(dir, LEADER_EPOCH_CHECKPOINT),
                                        durable=had_clean_shutdown)
    epoch_cache.files = files
    bases = _clean_leftovers(dir)

    def on_batch(header) -> None:
        epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

    # Unclean: recover from the segment holding the recovery point to the end.
    first_to_recover = len(bases)
    if not had_clean_shutdown:
        first_to_recover = 0
        for i, base in enumerate(bases):
            if base <= recovery_point:
                first_to_recover = i

    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        is_last = i == len(bases) - 1
        end_offset = None if is_last else bases[i + 1]
        segment, indexes_ok = LogSegment.open(dir, base, config, now_ms, files=files, full_index_check=is_last)
        segment.damaged = sorted(DamagedRange(*r) for r in known_damage.get(base, ())
                                 if r[1] <= segment.size)
        segments.append(segment)
        if not indexes_ok:
            stats.indexes_rebuilt += 1
        truncated = None
        if not indexes_ok or i >= first_to_recover:
            truncated = segment.recover(on_batch, recovery_point=recovery_point, end_offset=end_offset)
            stats.segments_recovered += 1
            stats.bytes_truncated += truncated
        else:
            try:
                segment.scan_tail()
            except InvalidRecordBatch as e:
                # Damage from outside (this segment was complete once, below the
                # recovery point): recovery keeps and marks what is damaged.
                log.warn("{dir}: segment {base} does not end on a batch boundary ({e}); "
                         "checking every batch", dir=dir, base=base, e=e)
                truncated = segment.recover(on_batch, recovery_point=recovery_point,
                                            end_offset=end_offset)
                stats.segments_recovered += 1
                stats.bytes_truncated += truncated
            else:
                if epoch_cache.damaged:
                    for _, header in segment.iter_headers(0):
                        on_batch(header)
        if not segment.txn_index_stale and segment.txn_index.last_offset >= segment.next_offset:
            log.warn("{dir}: the transaction index of segment {base} names offsets past the segment's end "
                     "({end}); rebuilding it", dir=dir, base=base, end=segment.next_offset)
            segment.txn_index.reset()
            segment.txn_index_stale = True
        if truncated is not None:
            segment.write_indexes()        # rebuilt: to the files now, we are in the pool anyway
        if truncated and not is_last:
            # The log must stay contiguous: what follows a segment recovery had
            # to cut cannot be trusted (and would leave a hole in the offsets).
            for later in bases[i + 1:]:
                log.warn("{dir}: deleting segment {base}: it follows a truncated segment",
                         dir=dir, base=later)
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    _remove(os.path.join(dir, segment_file_name(later, suffix)))
                stats.segments_deleted += 1
            break
        if truncated is not None and not is_last:
            segment.on_become_inactive()   # recovery rebuilt its indexes: final entry, then to disk
            segment.write_indexes()

    if not segments:
        segments = [LogSegment.create(dir, max(log_start_offset, 0), config, now_ms, files=files)]
    log_end = segments[-1].next_offset
    start = max(log_start_offset, segments[0].base_offset)
    if start > log_end:
        log.warn("{dir}: log start offset {start} is beyond the log end {end}; using the log end",
                 dir=dir, start=start, end=log_end)
        start = log_end
    epoch_cache.truncate_from_end(log_end, write=False)     # the file catches up at the next write
    epoch_cache.truncate_from_start(start, write=False)
    if had_clean_shutdown:
        recovery_point = log_end
    producers = ProducerStateManager(dir, f"{topic}-{partition}", producer_state_config)
    producers.rebuild(segments, start, log_end, now_ms, had_clean_shutdown=had_clean_shutdown)
    result = Log(dir, topic, partition, config, segments=segments, log_start_offset=start,
                 recovery_point=min(recovery_point, log_end), epoch_cache=epoch_cache,
                 topic_id=topic_id, files=files, segment_deleter=segment_deleter, producer_state=producers)
    result.recovery_stats = stats
    if rewrite_damage or known_damage or any(segment.damaged for segment in segments):
        result.save_damaged_ranges()
    if epoch_cache.damaged:
        try:
            epoch_cache.write(fsync=True)
        except OSError as e:
            # A full disk, say: the cache is right in memory, and the next flush writes it.
            log.warn("cannot write the rebuilt {path}: {e}; it is written at the next flush",
                     path=epoch_cache.path, e=e)
        epoch_cache.damaged = False
    if stats.segments_recovered or stats.indexes_rebuilt:
        log.info("loaded {log} after recovery: {stats}", log=result, stats=stats)
    return result
