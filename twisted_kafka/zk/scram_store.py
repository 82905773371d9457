"""ZkScramCredentialStore: SCRAM credentials in ZooKeeper, where Kafka's ZooKeeper mode keeps them.

Every broker of a cluster reads the same credentials, so a user is created
once (on any broker) rather than on each one.  The layout is Kafka's:

* ``/config/users/<sanitized user>`` holds the user's config entity,
  ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
  server_key=...,iterations=4096"}}`` -- the credential text is
  ``ScramCredentialUtils.credentialToString``; other keys of the entity (a
  user's quotas) are kept as they are;
* the user name in the path is Kafka's ``Sanitizer.sanitize`` (URL encoding,
  with ``*`` as ``%2A`` and space as ``%20``);
* each change is followed by a sequential ``/config/changes/config_change_``
  notification ``{"version":2,"entity_path":"users/<sanitized user>"}``
  (``AdminZkClient.changeEntityConfig``); a user left without any config is
  deleted first, as Kafka's ``tryCleanQuotaNodes`` does.

Reads stay in memory (the authenticator answers from it while a client
waits); a watch on ``/config/changes`` reloads the users named by new
notifications, so a change written by any broker, or by Kafka's
``kafka-configs.sh --zookeeper``, reaches every broker without a restart
(Kafka's ``UserConfigHandler`` does the same on its ``ZkConfigManager``
notifications).  The broker that writes a change shows it at once.
"""

from __future__ import annotations

import contextlib
from urllib.parse import quote, unquote_plus

from kazoo.exceptions import KazooException, NoNodeError, NotEmptyError
from twisted.internet.defer import DeferredLock
from twisted.logger import Logger

from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.scram_credentials import MECHANISMS, ScramCredential

from . import data as z
from .client import Watch, ZkClient

#: Kafka's ConfigType.USER.
USER_CONFIG = "users"


def sanitize(user: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's URLEncoder (unreserved: letters, digits, ``.-*_``), then
    ``*`` as ``%2A`` and a space as ``%20``."""
    return quote(user, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's URLDecoder: ``+`` is a space)."""
    return unquote_plus(name)


def user_path(user: str) -> str:
    return z.config_path(USER_CONFIG, sanitize(user))


def credentials_of(config: dict[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user's config entity (unreadable values are left out)."""
    found = {}
    for mechanism, text in config.items():
        if mechanism in MECHANISMS:
            with contextlib.suppress(ValueError):
                found[mechanism] = ScramCredential.from_text(text)
    return found


class ZkScramCredentialStore(InMemoryScramCredentialStore):
    """See the module docstring.  ``load_now()`` (blocking) fills it before the reactor runs;
    ``start()`` arms the change watch; ``stop()`` drops it."""

    log = Logger(namespace="twisted_kafka.zk.ZkScramCredentialStore")

    def __init__(self, zk: ZkClient):
        super().__init__()
        self._zk = zk
        self._last_change = -1
        self._watch: Watch | None = None
        self._writing = DeferredLock()      # one alteration at a time on this broker
        self._reloading = DeferredLock()    # notifications handled in order

    # -- loading ----------------------------------------------------------------------------

    def load_now(self) -> None:
        """Read every user's credentials with kazoo's blocking calls (the broker's start, the tool).

        The newest notification is noted *before* the users are read, so a change made meanwhile
        is reloaded again by the watch (reloads are idempotent)."""
        kazoo = self._zk.kazoo
        try:
            changes = kazoo.get_children(z.CONFIG_CHANGES)
        except NoNodeError:
            changes = []
        self._last_change = max((z.config_change_sequence(c) for c in changes
                                 if c.startswith(z.CONFIG_CHANGE_PREFIX)), default=-1)
        try:
            names = kazoo.get_children(f"{z.CONFIG}/{USER_CONFIG}")
        except NoNodeError:
            names = []
        credentials: dict[str, dict[str, ScramCredential]] = {}
        for name in names:
            try:
                data, _ = kazoo.get(z.config_path(USER_CONFIG, name))
            except NoNodeError:
                continue
            found = credentials_of(z.decode_config(data))
            if found:
                credentials[desanitize(name)] = found
        self._credentials = credentials

    def start(self) -> None:
        if self._watch is None:
            self._watch = self._zk.watch_children(z.CONFIG_CHANGES, self._changes)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    async def _changes(self, children: list[str] | None) -> None:
        await self._reloading.acquire()
        try:
            await self._process(children)
        except KazooException:
            if self._watch is None:
                return          # stopped (the session closes) while a reload was under way
            raise
        finally:
            self._reloading.release()

    async def _process(self, children: list[str] | None) -> None:
        """Reload the users named by notifications newer than the last one handled."""
        for child in children or ():
            if not child.startswith(z.CONFIG_CHANGE_PREFIX):
                continue
            sequence = z.config_change_sequence(child)
            if sequence <= self._last_change:
                continue
            data, _ = await self._zk.get_or_none(f"{z.CONFIG_CHANGES}/{child}")
            self._last_change = sequence
            if data is None:
                continue
            try:
                entity_type, entity = z.decode_config_change(data)
            except (ValueError, KeyError, TypeError):
                self.log.warn("Ignoring an unreadable config change notification {name}", name=child)
                continue
            # ``<user>/clients/<client>`` and ``<default>`` are quota entities, not credentials.
            if entity_type == USER_CONFIG and "/" not in entity and entity != z.DEFAULT_ENTITY:
                await self._reload(desanitize(entity))

    async def _reload(self, user: str) -> None:
        data, _ = await self._zk.get_or_none(user_path(user))
        found = credentials_of(z.decode_config(data))
        credentials = dict(self._credentials)
        if found:
            credentials[user] = found
        else:
            credentials.pop(user, None)
        self._credentials = credentials

    async def refresh(self, users) -> None:
        """Read ``users`` from ZooKeeper now (AlterUserScramCredentials checks deletions against what
        ZooKeeper holds, as Kafka's ``ZkAdminManager`` does, not against a notification still on its way)."""
        try:
            for user in dict.fromkeys(users):
                await self._reload(user)
        except KazooException as exc:
            raise OSError(f"ZooKeeper: {type(exc).__name__} {exc}") from exc

    # -- writing ----------------------------------------------------------------------------

    async def alter(self, upsertions, deletions) -> None:
        """Per user, as Kafka's ``ZkAdminManager.alterUserScramCredentials``: read the user's config,
        change its SCRAM keys, write it (or delete it when nothing is left), then notify.  A ZooKeeper
        failure is raised as ``OSError``."""
        upsertions, deletions = list(upsertions), list(deletions)
        users = list(dict.fromkeys([user for user, _ in deletions] + [user for user, _, _ in upsertions]))
        await self._writing.acquire()
        try:
            for user in users:
                try:
                    await self._alter_user(user, [(m, c) for u, m, c in upsertions if u == user],
                                           [m for u, m in deletions if u == user])
                except KazooException as exc:
                    raise OSError(f"ZooKeeper: {type(exc).__name__} {exc}") from exc
        finally:
            self._writing.release()

    async def _alter_user(self, user: str, upsertions: list[tuple[str, ScramCredential]],
                          deletions: list[str]) -> None:
        path = user_path(user)
        data, _ = await self._zk.get_or_none(path)
        config = z.decode_config(data)
        for mechanism in deletions:
            config.pop(mechanism, None)
        for mechanism, credential in upsertions:
            config[mechanism] = credential.to_text()
        written = False
        if not config:
            try:
                await self._zk.delete(path)
                written = True
            except NoNodeError:
                written = True
            except NotEmptyError:       # per-client quotas under it: keep it, empty
                pass
        if not written:
            await self._zk.set_or_create(path, z.encode_config(config))
        await self._zk.create(f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}",
                              z.encode_config_change(USER_CONFIG, sanitize(user)), sequence=True, makepath=True)
        found = credentials_of(config)
        credentials = dict(self._credentials)
        if found:
            credentials[user] = found
        else:
            credentials.pop(user, None)
        self._credentials = credentials


__all__ = ["ZkScramCredentialStore", "sanitize", "desanitize", "user_path", "USER_CONFIG"]
