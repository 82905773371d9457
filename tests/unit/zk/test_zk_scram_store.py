"""ZkScramCredentialStore against a real ZooKeeper: Kafka's ``/config/users`` JSON both ways, change
notifications that refresh another broker's store, Kafka's user-name sanitizing."""

from __future__ import annotations

import json
import os

from twisted.internet import reactor
from twisted.internet.task import deferLater

from twisted_kafka.sasl.scram_credentials import SCRAM_SHA_256, SCRAM_SHA_512, credential_from_password
from twisted_kafka.zk import data as z
from twisted_kafka.zk.registration import ensure_persistent_paths
from twisted_kafka.zk.scram_store import ZkScramCredentialStore, desanitize, sanitize

from .helpers import ZkTestCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

ALICE_256 = credential_from_password(SCRAM_SHA_256, "alice-secret", 4096, salt=b"0123456789abcdef")
ALICE_512 = credential_from_password(SCRAM_SHA_512, "alice-secret", 8192, salt=b"fedcba9876543210")


async def until(condition, timeout: float = 10.0) -> None:
    for _ in range(int(timeout * 100)):
        if condition():
            return
        await deferLater(reactor, 0.01, lambda: None)
    raise AssertionError("condition not met")


def test_sanitize_is_kafka_s():
    assert sanitize("alice") == "alice"
    assert sanitize("CN=a b,O=x*") == "CN%3Da%20b%2CO%3Dx%2A"
    assert sanitize("ü~") == "%C3%BC%7E"
    assert desanitize("CN%3Da%20b%2CO%3Dx%2A") == "CN=a b,O=x*"
    assert desanitize("a+b") == "a b"


class ZkScramCredentialStoreTest(ZkTestCase):
    def setUp(self):
        with self.zookeeper.client(self.chroot) as raw:
            ensure_persistent_paths(raw)

    def store(self) -> ZkScramCredentialStore:
        store = ZkScramCredentialStore(self.connect())
        store.load_now()
        store.start()
        self.addCleanup(store.stop)
        return store

    async def test_writes_kafka_s_json_and_a_change_notification(self):
        store = self.store()
        await store.alter([("alice", "SCRAM-SHA-256", ALICE_256), ("alice", "SCRAM-SHA-512", ALICE_512)], [])
        assert store.get("alice", "SCRAM-SHA-256") == ALICE_256
        with self.zookeeper.client(self.chroot) as raw:
            document = json.loads(raw.get("/config/users/alice")[0])
            assert document == {"version": 1, "config": {"SCRAM-SHA-256": ALICE_256.to_text(),
                                                         "SCRAM-SHA-512": ALICE_512.to_text()}}
            assert document["config"]["SCRAM-SHA-256"].startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=")
            assert document["config"]["SCRAM-SHA-256"].endswith(",iterations=4096")
            changes = raw.get_children("/config/changes")
            assert [json.loads(raw.get(f"/config/changes/{c}")[0]) for c in changes] == [
                {"version": 2, "entity_path": "users/alice"}]

    async def test_reads_credentials_written_in_kafka_s_format(self):
        """What Kafka's kafka-configs.sh --zookeeper writes (with a quota beside the credential)."""
        with self.zookeeper.client(self.chroot) as raw:
            raw.create("/config/users/CN%3Dbob%2CO%3Dx", json.dumps({"version": 1, "config": {
                "SCRAM-SHA-512": ALICE_512.to_text(), "producer_byte_rate": "1024"}}).encode())
        store = self.store()
        assert store.get("CN=bob,O=x", "SCRAM-SHA-512") == ALICE_512
        assert store.get("CN=bob,O=x", "SCRAM-SHA-256") is None
        # A deletion keeps the entity's other config.
        await store.alter([], [("CN=bob,O=x", "SCRAM-SHA-512")])
        assert store.users() == {}
        with self.zookeeper.client(self.chroot) as raw:
            assert json.loads(raw.get("/config/users/CN%3Dbob%2CO%3Dx")[0]) == {
                "version": 1, "config": {"producer_byte_rate": "1024"}}

    async def test_deleting_the_last_credential_deletes_the_user_s_znode(self):
        store = self.store()
        await store.alter([("alice", "SCRAM-SHA-256", ALICE_256)], [])
        await store.alter([], [("alice", "SCRAM-SHA-256")])
        assert store.get("alice", "SCRAM-SHA-256") is None
        with self.zookeeper.client(self.chroot) as raw:
            assert raw.exists("/config/users/alice") is None

    async def test_a_change_notification_refreshes_another_broker_s_store(self):
        first, second = self.store(), self.store()
        await first.alter([("alice", "SCRAM-SHA-256", ALICE_256)], [])
        await until(lambda: second.get("alice", "SCRAM-SHA-256") == ALICE_256)
        await second.alter([("alice", "SCRAM-SHA-512", ALICE_512)], [("alice", "SCRAM-SHA-256")])
        await until(lambda: first.users() == {"alice": {"SCRAM-SHA-512": ALICE_512}})
        await first.alter([], [("alice", "SCRAM-SHA-512")])
        await until(lambda: second.users() == {})

    async def test_a_change_written_by_another_tool_is_picked_up(self):
        store = self.store()
        with self.zookeeper.client(self.chroot) as raw:
            raw.create("/config/users/carol", z.encode_config({"SCRAM-SHA-256": ALICE_256.to_text()}))
            raw.create("/config/changes/config_change_", z.encode_config_change("users", "carol"), sequence=True)
            # Quota-only entities are not credentials.
            raw.create("/config/changes/config_change_", z.encode_config_change("users", "<default>"),
                       sequence=True)
        await until(lambda: store.get("carol", "SCRAM-SHA-256") == ALICE_256)

    async def test_a_store_loaded_later_sees_earlier_users_and_skips_old_notifications(self):
        first = self.store()
        await first.alter([("alice", "SCRAM-SHA-256", ALICE_256)], [])
        second = self.store()
        assert second.get("alice", "SCRAM-SHA-256") == ALICE_256
        assert second._last_change == 0

    async def test_the_tool_writes_zookeeper_and_running_stores_reload(self):
        """``bin/twisted-kafka-scram --zookeeper``: Kafka's ``kafka-configs.sh --zookeeper`` for users."""
        store = self.store()
        connect = self.zookeeper.connect_string(self.chroot)
        added = await tool("--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name", "erin",
                           "--add-config", "SCRAM-SHA-512=[iterations=8192,password=erin-secret]")
        assert added == (0, f"Completed updating config for user erin in ZooKeeper {connect}.\n"), added
        await until(lambda: store.get("erin", "SCRAM-SHA-512") is not None)
        assert store.get("erin", "SCRAM-SHA-512").iterations == 8192
        described = await tool("--zookeeper", connect, "--describe", "--entity-name", "erin")
        assert described == (0, "SCRAM credential configs for user-principal 'erin' are "
                                "SCRAM-SHA-512=iterations=8192\n"), described
        assert (await tool("--zookeeper", connect, "--alter", "--entity-name", "erin",
                           "--delete-config", "SCRAM-SHA-512"))[0] == 0
        await until(lambda: store.users() == {})


async def tool(*args: str) -> tuple[int, str]:
    """Run bin/twisted-kafka-scram (its own process: it runs a reactor); (exit status, stdout)."""
    from twisted.internet.utils import getProcessOutputAndValue

    out, err, code = await getProcessOutputAndValue(os.path.join(ROOT, "bin", "twisted-kafka-scram"), args,
                                                    env=dict(os.environ), reactor=reactor)
    return code, out.decode() + err.decode()


class ZkScramRefreshTest(ZkTestCase):
    def setUp(self):
        with self.zookeeper.client(self.chroot) as raw:
            ensure_persistent_paths(raw)

    async def test_refresh_reads_a_user_without_waiting_for_the_notification(self):
        unwatched = ZkScramCredentialStore(self.connect())      # loaded, never started: no watch
        unwatched.load_now()
        writer = ZkScramCredentialStore(self.connect())
        await writer.alter([("frank", "SCRAM-SHA-256", ALICE_256)], [])
        assert unwatched.get("frank", "SCRAM-SHA-256") is None
        await unwatched.refresh(["frank"])
        assert unwatched.get("frank", "SCRAM-SHA-256") == ALICE_256
        await writer.alter([], [("frank", "SCRAM-SHA-256")])
        await unwatched.refresh(["frank", "frank"])
        assert unwatched.users() == {}
