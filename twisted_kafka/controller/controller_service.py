"""ControllerService: the controller as one of the broker's child services.

A single node is its own controller.  Starting the service makes the
controller active -- it bumps the controller epoch and tells every
registered broker (this one, over its control plane) the whole state --
which needs this broker's control-plane listener bound and accepting, and
its endpoints known (a listener on port 0 advertises the port it bound).
Stopping it deactivates the controller and closes its connections.  The
cluster metadata store is the controller's own: a single node keeps it in a
JSON file under the first log directory.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.application.service import Service
from twisted.internet.defer import ensureDeferred

from .channel_manager import ControllerChannelManager
from .client import LocalControllerClient
from .interface import LiveBroker
from .kafka_controller import KafkaController
from .metadata_store import ClusterMetadataStore, JsonFileMetadataStore
from .metrics import register_controller_metrics


class ControllerService(Service):
    name = "controller"

    def __init__(self, *, config, broker_id: int, cluster_id: str, metadata_dir: str, reactor, threadpool,
                 registration: Callable[[], LiveBroker], space=None, log_dirs: list[str] | None = None):
        """``space``: the ``LogDirSpace`` of ``metadata_dir`` (its reserve serves writes on a full disk);
        ``log_dirs``: where to find the partition directories should the metadata file be lost."""
        self._registration = registration
        store: ClusterMetadataStore = JsonFileMetadataStore(metadata_dir, reactor=reactor, threadpool=threadpool,
                                                            space=space, log_dirs=log_dirs, broker_id=broker_id)
        self.controller = KafkaController(
            config=config, broker_id=broker_id, cluster_id=cluster_id, store=store,
            channels=ControllerChannelManager(reactor=reactor, controller_id=broker_id,
                                              timeout_ms=config["controller.socket.timeout.ms"], config=config))
        self.client = LocalControllerClient(self.controller)

    def register_metrics(self, metrics) -> None:
        """Kafka's ``kafka.controller:type=KafkaController`` gauges (``controller/metrics.py``)."""
        register_controller_metrics(metrics, self.controller)

    def startService(self):
        super().startService()
        return ensureDeferred(self.controller.startup([self._registration()]))

    def stopService(self):
        super().stopService()
        self.controller.shutdown()


__all__ = ["ControllerService"]
