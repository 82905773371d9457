"""Small text files that record log state between runs, in Kafka's formats.

* ``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint``
  (one per log dir)::

      0                 <- version
      2                 <- number of entries
      orders 0 1234     <- topic partition offset
      orders 1 977

* ``leader-epoch-checkpoint`` (one per partition)::

      0
      2
      0 0               <- epoch start_offset
      3 4711

* ``partition.metadata`` (one per partition)::

      version: 0
      topic_id: <topic id in Kafka's base64url form, 22 characters>

* ``damaged-ranges`` (one per partition, only when a segment holds damaged
  data below the recovery point; this broker's own, Kafka has no such file)::

      0
      1
      0 8192 8704 40 43    <- segment base, first byte, end byte, first offset, last offset

* ``.kafka_cleanshutdown`` (one per log dir) is a marker: present means every
  log in that dir was flushed and closed; its content is
  ``{"version":0,"brokerEpoch":N}`` as in Kafka 3.7+.

Every write goes to ``<name>.tmp``, is fsynced, renamed over the old file and
the directory fsynced, so a crash leaves either the old or the new content.
A file that cannot be parsed raises ``CheckpointError``; callers fall back to
the safe choice (recover everything, rebuild from the segments).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import uuid
from collections.abc import Iterable

from twisted_kafka.log.disk_space import is_out_of_space
from twisted_kafka.log.file_handles import FileHandleCache, os_open
from twisted_kafka.log.layout import TMP_SUFFIX, fsync_dir


class CheckpointError(ValueError):
    """A checkpoint file exists but its content is not in the expected format."""


#: The mode of files holding secrets (credentials, encrypted passwords): the broker's user only.
PRIVATE_MODE = 0o600


def write_atomically(path: str, data: bytes, *, fsync: bool = True, space=None, mode: int = 0o644,
                     files: FileHandleCache | None = None) -> None:
    """Replace ``path`` with ``data`` so a crash leaves old or new content, never a mix.

    ``fsync=False`` keeps the rename (never a torn file) but skips the disk
    barriers; used where a later flush makes the content durable.  With
    ``space`` (the log dir's ``LogDirSpace``) a write that runs out of space
    releases the directory's space reserve and is tried once more.  A failed
    write leaves no temporary file behind.  The new file has exactly ``mode``
    (``PRIVATE_MODE`` for secrets), whatever the umask or a temporary file
    left by a crash had.  ``files`` (the log manager's descriptor cache)
    closes idle segment files when the process is out of descriptors;
    without it the file is opened plainly.
    """
    try:
        _write_atomically(path, data, fsync, mode=mode, files=files)
    except OSError as e:
        if space is None or not is_out_of_space(e) or \
                not space.release_reserve(os.path.relpath(path, space.path)):
            raise
        _write_atomically(path, data, fsync, mode=mode, files=files)


def _write_atomically(path: str, data: bytes, fsync: bool, mode: int = 0o644,
                      files: FileHandleCache | None = None) -> None:
    tmp = path + TMP_SUFFIX
    try:
        fd = os_open(files, tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            # O_CREAT's mode applies only to a file it creates, and through the umask: a
            # temporary file left behind by a crash would keep its mode otherwise.
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


def _lines(path: str) -> list[str] | None:
    """The file's lines; None when it does not exist; CheckpointError when it is not text."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        return raw.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not a text file") from None


def _header(path: str, lines: list[str]) -> int:
    try:
        version = int(lines[0])
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CheckpointError(f"{path}: malformed header") from None
    if version != 0:
        raise CheckpointError(f"{path}: unsupported version {version}")
    if len(lines) - 2 < count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(lines) - 2}")
    return count


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}``; empty when the file does not exist."""
    lines = _lines(path)
    if lines is None:
        return {}
    count = _header(path, lines)
    out = {}
    for line in lines[2:2 + count]:
        parts = line.split(" ")
        if len(parts) != 3:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {line!r}") from None
    return out


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int], *,
                            fsync: bool = True, space=None, files: FileHandleCache | None = None) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode(), fsync=fsync, space=space, files=files)


def read_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    """``[(epoch, start_offset), ...]`` in file order; empty when absent."""
    lines = _lines(path)
    if lines is None:
        return []
    count = _header(path, lines)
    out = []
    for line in lines[2:2 + count]:
        parts = line.split(" ")
        try:
            epoch, offset = int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            raise CheckpointError(f"{path}: malformed entry {line!r}") from None
        if len(parts) != 2:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        out.append((epoch, offset))
    return out


def write_epoch_checkpoint(path: str, entries: Iterable[tuple[int, int]], *,
                           fsync: bool = True, space=None, files: FileHandleCache | None = None) -> None:
    entries = list(entries)
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    write_atomically(path, ("\n".join(lines) + "\n").encode(), fsync=fsync, space=space, files=files)


def read_damaged_ranges(path: str) -> dict[int, list[tuple[int, int, int, int]]]:
    """``{segment base: [(start, end, first offset, last offset), ...]}``; empty when absent."""
    lines = _lines(path)
    if lines is None:
        return {}
    count = _header(path, lines)
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    for line in lines[2:2 + count]:
        try:
            base, start, end, first, last = (int(x) for x in line.split(" "))
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {line!r}") from None
        if not 0 <= start < end or last < first - 1:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        out.setdefault(base, []).append((start, end, first, last))
    return out


def write_damaged_ranges(path: str, ranges: dict[int, list[tuple[int, int, int, int]]], *,
                         fsync: bool = True, space=None, files: FileHandleCache | None = None) -> None:
    """Write the damaged ranges; with none left the file is removed."""
    entries = [(base, *r) for base, rs in sorted(ranges.items()) for r in sorted(rs)]
    if not entries:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    lines = ["0", str(len(entries))] + [" ".join(str(x) for x in entry) for entry in entries]
    write_atomically(path, ("\n".join(lines) + "\n").encode(), fsync=fsync, space=space, files=files)


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: base64url of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {text!r}")
    return uuid.UUID(bytes=raw)


def read_partition_metadata(path: str) -> uuid.UUID | None:
    lines = _lines(path)
    if lines is None:
        return None
    fields = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: malformed partition metadata")
    try:
        return topic_id_from_str(fields["topic_id"])
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from None


def write_partition_metadata(path: str, topic_id: uuid.UUID, *, fsync: bool = True,
                             space=None, files: FileHandleCache | None = None) -> None:
    text = f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n"
    write_atomically(path, text.encode(), fsync=fsync, space=space, files=files)


def write_clean_shutdown_marker(path: str, broker_epoch: int = -1, *, space=None,
                                files: FileHandleCache | None = None) -> None:
    write_atomically(path, json.dumps({"version": 0, "brokerEpoch": broker_epoch},
                                      separators=(",", ":")).encode(), space=space, files=files)


def write_private_atomically(path: str, data: bytes, *, space=None) -> None:
    """Replace ``path`` with ``data``, readable by the broker's user only (mode 0600: secrets such as
    salted credentials), so a crash leaves the old content or the new. BLOCKING."""
    write_atomically(path, data, space=space, mode=PRIVATE_MODE)
