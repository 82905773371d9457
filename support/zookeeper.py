"""A real ZooKeeper in a child process, for the cluster tests.

``twisted_kafka.testing.zookeeper`` (which ``EmbeddedCluster`` uses too):
Debian's zookeeper package under Java 17, on a loopback port the kernel
picks.  One ZooKeeper serves a whole test module (the ``zookeeper`` fixture
of tests/conftest.py); each test gets its own chroot
(``zookeeper.connect=127.0.0.1:port/<chroot>``), so every test starts a new
cluster.

    zk = ZooKeeperServer(tmp_path).start()
    broker overrides: {"zookeeper.connect": zk.connect_string("/test-a")}
    with zk.client() as client: client.get_children("/test-a/brokers/ids")
    zk.stop()
"""

from twisted_kafka.testing.zookeeper import LAUNCHER, ZooKeeperServer, ZooKeeperUnavailable, zookeeper_classpath

__all__ = ["ZooKeeperServer", "ZooKeeperUnavailable", "zookeeper_classpath", "LAUNCHER"]
