"""The broker's ZooKeeper session as a child service of the broker.

The session is opened when the server is built (the broker's identity is
settled before the reactor runs) and closed when the service stops: after
every service started after it, before the admin endpoint and the thread
pool, so this broker's registration and any ``/controller`` it holds last
until the broker's other work has stopped.
"""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import Deferred

from .client import ZkClient

__all__ = ["ZooKeeperSession"]


class ZooKeeperSession(Service):
    """The broker's ZooKeeper session as a service: ``stopService`` closes it (see the module docstring)."""

    name = "zookeeper"

    def __init__(self, zk: ZkClient):
        self.zk = zk

    def stopService(self) -> Deferred:
        super().stopService()
        return self.zk.close()
