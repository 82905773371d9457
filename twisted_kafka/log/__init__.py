"""The durable log: partitions as segment files under ``log.dirs``.

On disk (Kafka's layout, so operators' habits carry over)::

    <log.dir>/
      .lock                             flock-ed by the running broker (one per dir); its pid
      .kafka_cleanshutdown              marker: every log here was flushed and closed
      .space-reserve                    preallocated room for the files below on a full disk
      recovery-point-offset-checkpoint  "0\\n<n>\\n<topic> <partition> <offset>\\n..."
      log-start-offset-checkpoint       same format
      <topic>-<partition>/
        partition.metadata              "version: 0\\ntopic_id: <base64url id>\\n"
        leader-epoch-checkpoint         "0\\n<n>\\n<epoch> <start offset>\\n..."
        damaged-ranges                  damaged data below the recovery point (rare)
        00000000000000000000.log        record batches (v2) exactly as stored, back to back
        00000000000000000000.index      (relative offset int32, position int32), sparse
        00000000000000000000.timeindex  (timestamp int64, relative offset int32), sparse
        00000000000000000000.txnindex   aborted transactions whose markers are here (34-byte entries)
        00000000000000004711.snapshot   producer state (idempotence, open transactions) at that offset
        00000000000000004711.log ...    next segment, named by its base offset
      <topic>-<partition>.<uuid>-delete/  a deleted partition awaiting removal

The rest of the broker sees ``partition_log`` only: ``PartitionLog`` (one
partition's log) and ``LogStore`` (the logs a broker hosts), with the types
they use, exported here with ``LogConfig`` and ``LogManager``.

Modules: ``partition_log`` (the interface), ``log_config`` (``LogConfig``),
``layout`` (names), ``checkpoints`` (the small text files),
``file_handles`` (segment files' descriptors: opened on demand, bounded,
least recently used closed first, one cache per ``LogManager``), ``index``
(offset and time index, written at flush/close), ``txn_index`` (the
aborted-transaction index), ``producer_state`` (idempotent and
transactional producers, the last stable offset's inputs), ``batches``
(what the log uses of the record codec), ``segment`` (``LogSegment``), ``epoch_cache``
(``LeaderEpochCache``), ``log`` (``Log``, Kafka's ``LocalLog``),
``recovery`` (loading and crash recovery of one log), ``retention``,
``flusher`` (coalesced fsyncs), ``disk_space`` (a full log dir: refused
appends, the space reserve), ``inventory`` (what the partition directories
say about themselves), ``unified_log`` (``UnifiedLog``, the file log's
``PartitionLog``), and ``log_manager`` (``LogManager``, the service and the
file ``LogStore``) with its parts ``log_loader`` (loading and recovery),
``log_registry`` (one ``UnifiedLog`` per partition), ``log_scheduler``
(periodic tasks, delayed deletion) and ``disk_space.LogDirSpaces``.

What runs where — measured with ``bench/log_io.py`` (ext4 on a virtio disk,
2 shared cores; ms per operation)::

                          inline on reactor    split, as UnifiedLog does it:
                          p50 / max            on-reactor p50 / latency p50
    append 16 KiB         0.08 / 0.28          0.05 / 0.12   (write in pool: not worth it)
    append 1 MiB          0.35 / 0.91 (*)      0.13 / 0.42   (validate+copy stay, pwrite moves)
    append+fsync 16 KiB   0.47 / 4.1  (**)     0.08 / 0.63
    append+fsync 1 MiB    1.11 / 2.3           0.37 / 1.12
    read 1 MiB, cached    0.08 / 0.18          0.10 / 0.10   (served inline)
    read 1 MiB, uncached  2.20 / 3.0           0.08 / 1.99   (RWF_NOWAIT fails -> pool)

    (*)  up to 1.5 ms/MiB under sustained writes (page-cache writeback), i.e. the
         cost grows with the request: a 100 MiB produce would block for ~150 ms.
    (**) fsync tails reached 13-17 ms (p99) while other processes used the disk.

Decision:

* validation, offset assignment, index updates, rolls: on the reactor (CPU:
  ~0.08 ms/MiB uncompressed, plus ~0.08 ms per compressed 16 KiB batch
  decompressed to check its records; a thread would not help under the GIL
  and would lose the arrival order that assigns offsets);
* the segment write: on the reactor up to 64 KiB
  (``unified_log.INLINE_WRITE_MAX_BYTES``), in the thread pool above; appends
  still become visible and are acknowledged in offset order;
* fsync (flush policy, flush.ms, segment roll, shutdown): always in the pool;
* reads: tried on the reactor with ``preadv(RWF_NOWAIT)`` — the page cache
  only — and redone in the pool if the data or the index is not in memory
  (``UnifiedLog.read``); ListOffsets by timestamp: in the pool;
* loading/recovery, checkpoints, file deletion: in the pool.
"""

from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.log.partition_log import (
    AbortedTransaction,
    AppendOrigin,
    FetchDataInfo,
    FetchIsolation,
    LogAppendInfo,
    LogStore,
    OffsetsListener,
    PartitionLog,
    ProducerStateEntry,
    TimestampAndOffset,
)

__all__ = [
    "AbortedTransaction",
    "AppendOrigin",
    "FetchDataInfo",
    "FetchIsolation",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogStore",
    "OffsetsListener",
    "PartitionLog",
    "ProducerStateEntry",
    "TimestampAndOffset",
]
