"""Where SCRAM credentials live: an interface, and the file under ``log.dirs`` that keeps them today.

The authenticator reads credentials synchronously, from memory, while a
client waits for its server-first message; changes (AlterUserScramCredentials,
the ``twisted-kafka-scram`` tool) go through ``alter``, which returns once
they are durable and only then shows them to readers.

``FileScramCredentialStore`` keeps ``scram-credentials.json`` in the first
log directory::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,iterations=8192"}}}

Each value is Kafka's credential text (``ScramCredential.to_text``).  The
file is replaced atomically (a temporary file, fsync, rename, fsync of the
directory), readable by its owner only; a crash leaves the old content or the
new, never a mix.  Passwords are never written: only salt, iterations,
StoredKey and ServerKey.

A ZooKeeper cluster keeps credentials where Kafka does, one znode per user:
``/config/users/<user>`` holding ``{"version":1,"config":{"SCRAM-SHA-256":
"<credential text>", ...}}``, with a change notification under
``/config/changes/config_change_<seq>`` (``{"version":2,"entity_path":
"users/<user>"}``) so every broker reloads it: ``ZkScramCredentialStore``
(``twisted_kafka.zk.scram_store``) implements this interface there.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping

from twisted.internet.defer import DeferredLock

from twisted_kafka.log.checkpoints import write_private_atomically

from .scram_credentials import MECHANISMS, ScramCredential

STORE_FILE = "scram-credentials.json"
FORMAT_VERSION = 1

#: {user: {mechanism name: credential}}
Credentials = Mapping[str, Mapping[str, ScramCredential]]


class ScramCredentialStore(ABC):
    """SCRAM credentials by user and mechanism."""

    @abstractmethod
    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        """The credential ``user`` authenticates with over ``mechanism`` (a SASL name), if any."""

    @abstractmethod
    def users(self) -> Credentials:
        """Every user with at least one credential (a snapshot)."""

    async def refresh(self, users: Iterable[str]) -> None:
        """Bring ``users`` up to date from a store shared with other brokers before they are checked
        (nothing to do for a store of this broker's own); raises ``OSError`` if it cannot be read."""
        return None

    @abstractmethod
    async def alter(self, upsertions: Iterable[tuple[str, str, ScramCredential]],
                    deletions: Iterable[tuple[str, str]]) -> None:
        """Apply ``(user, mechanism, credential)`` upsertions and ``(user, mechanism)`` deletions together,
        durably, before returning; raises ``OSError`` (nothing changed) if they cannot be stored."""


class InMemoryScramCredentialStore(ScramCredentialStore):
    """Credentials in memory only (unit tests, and the base of the file store)."""

    def __init__(self, credentials: Credentials | None = None):
        self._credentials: dict[str, dict[str, ScramCredential]] = {
            user: dict(by_mechanism) for user, by_mechanism in (credentials or {}).items()}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> Credentials:
        return {user: dict(by_mechanism) for user, by_mechanism in self._credentials.items()}

    def _changed(self, upsertions, deletions) -> dict[str, dict[str, ScramCredential]]:
        changed = {user: dict(by_mechanism) for user, by_mechanism in self._credentials.items()}
        for user, mechanism in deletions:
            by_mechanism = changed.get(user, {})
            by_mechanism.pop(mechanism, None)
            if not by_mechanism:
                changed.pop(user, None)
        for user, mechanism, credential in upsertions:
            changed.setdefault(user, {})[mechanism] = credential
        return changed

    async def alter(self, upsertions, deletions) -> None:
        self._credentials = self._changed(list(upsertions), list(deletions))


def encode(credentials: Credentials) -> bytes:
    users = {user: {mechanism: credential.to_text() for mechanism, credential in sorted(by_mechanism.items())}
             for user, by_mechanism in sorted(credentials.items())}
    return json.dumps({"version": FORMAT_VERSION, "users": users}, indent=1).encode("utf-8") + b"\n"


def decode(data: bytes, path: str) -> dict[str, dict[str, ScramCredential]]:
    try:
        document = json.loads(data)
        if document.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown format version {document.get('version')!r}")
        return {user: {mechanism: ScramCredential.from_text(text) for mechanism, text in by_mechanism.items()
                       if mechanism in MECHANISMS}
                for user, by_mechanism in document["users"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: unreadable SCRAM credentials file: {exc}") from None


class FileScramCredentialStore(InMemoryScramCredentialStore):
    """``scram-credentials.json`` in a log directory (see the module docstring).

    ``run_blocking(function, *args)`` runs the file write off the reactor
    (the broker passes its I/O thread pool) and returns an awaitable; without
    it the write runs in the caller (the offline tool, tests).
    """

    def __init__(self, directory: str, *, run_blocking=None):
        self.path = os.path.join(directory, STORE_FILE)
        self._run_blocking = run_blocking
        self._writing = DeferredLock()   # one write at a time, each built on the one before
        super().__init__(self.load(self.path))

    @staticmethod
    def load(path: str) -> dict[str, dict[str, ScramCredential]]:
        """The credentials in ``path`` (none if it does not exist). BLOCKING."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return {}
        return decode(data, path)

    async def alter(self, upsertions, deletions) -> None:
        upsertions, deletions = list(upsertions), list(deletions)
        await self._writing.acquire()
        try:
            changed = self._changed(upsertions, deletions)
            data = encode(changed)
            if self._run_blocking is None:
                write_private_atomically(self.path, data)
            else:
                await self._run_blocking(write_private_atomically, self.path, data)
            self._credentials = changed
        finally:
            self._writing.release()


__all__ = ["ScramCredentialStore", "InMemoryScramCredentialStore", "FileScramCredentialStore", "STORE_FILE"]
