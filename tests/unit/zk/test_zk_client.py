"""ZkClient against a real ZooKeeper: Deferreds fired on the reactor, watches re-armed and delivered
with the current value, transactions, the chroot created when missing, session expiry."""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.task import deferLater

from twisted_kafka.zk.client import BadVersionError, NodeExistsError, NoNodeError, parse_connect

from .helpers import ZkTestCase, last_call_is, nth_call


def test_parse_connect():
    assert parse_connect("a:1,b:2/kafka/prod/") == ("a:1,b:2", "/kafka/prod")
    assert parse_connect(" h:2181 ") == ("h:2181", None)
    assert parse_connect("h:2181/") == ("h:2181", None)


class ZkClientTest(ZkTestCase):
    async def test_operations_and_the_chroot(self):
        client = self.connect()
        assert await client.get_children("/") == []           # the chroot was created, and is the root
        await client.create("/a/b", b"x", makepath=True)
        data, stat = await client.get("/a/b")
        assert (data, stat.version) == (b"x", 0)
        assert (await client.set("/a/b", b"y", version=0)).version == 1
        with self.assertRaises(BadVersionError):
            await client.set("/a/b", b"z", version=0)
        with self.assertRaises(NodeExistsError):
            await client.create("/a/b")
        assert await client.get_or_none("/nope") == (None, None)
        await client.set_or_create("/c/d", b"1")
        await client.set_or_create("/c/d", b"2")
        assert (await client.get("/c/d"))[0] == b"2"
        await client.delete_recursive("/a")
        with self.assertRaises(NoNodeError):
            await client.get("/a")
        with self.zookeeper.client() as raw:
            assert sorted(raw.get_children(self.chroot)) == ["c"]

    async def test_transactions_report_each_operation(self):
        client = self.connect()
        await client.create("/x", b"")
        ok = await client.multi(lambda t: (t.check("/x", 0), t.create("/y", b"1"), t.set_data("/x", b"2", 0)))
        assert ok[0] is True and ok[1] == "/y" and ok[2].version == 1
        failed = await client.multi(lambda t: (t.check("/x", 0), t.create("/z", b"")))
        assert isinstance(failed[0], BadVersionError)
        assert await client.exists("/z") is None

    async def test_watches_deliver_the_current_value(self):
        client = self.connect()
        children, data = [], []
        client.watch_children("/brokers", children.append)
        client.watch_data("/controller", lambda value, stat: data.append(value))
        assert await nth_call(children, 1) is None and await nth_call(data, 1) is None   # missing: creation watched
        await client.create("/brokers/1", makepath=True)
        await last_call_is(children, ["1"])
        await client.create("/controller", b"7")
        await last_call_is(data, b"7")
        await client.delete("/controller")
        await last_call_is(data, None)
        await client.create("/brokers/2")
        await last_call_is(children, ["1", "2"])

    async def test_an_expired_session_is_reported_and_watches_come_back(self):
        client = self.connect(session_timeout_ms=1000)
        states, children = [], []
        client.add_session_listener(states.append)
        client.watch_children("/w", children.append)
        await client.create("/w/ephemeral", ephemeral=True, makepath=True)
        await last_call_is(children, ["ephemeral"])
        # Expire the session the way ZooKeeper does: another client with the same session id and
        # password connects, and closes.
        from kazoo.client import KazooClient
        session_id, password = client.kazoo.client_id
        hosts = self.zookeeper.hosts
        thief = KazooClient(hosts=hosts, client_id=(session_id, password))
        await deferLater(reactor, 0, thief.start)
        await deferLater(reactor, 0, thief.stop)
        for _ in range(300):
            if "LOST" in states and client.connected:
                break
            await deferLater(reactor, 0.05, lambda: None)
        assert "LOST" in states and client.connected
        assert client.session_id != session_id
        await last_call_is(children, [])    # the ephemeral znode went with the session; the watch is back
