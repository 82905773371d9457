"""A KafkaController on a real JsonFileMetadataStore, with channels the test controls.

The store's "thread pool" runs work at once and the reactor is a ``Clock``:
everything is synchronous and deterministic.  ``FakeChannels`` records every
request the controller sends, per broker in order, and answers it with
success -- at once, or when the test releases it (``hold``).
"""

from __future__ import annotations

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.python.failure import Failure

from support.inline import InlineReactor, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.controller.interface import LiveBroker
from twisted_kafka.controller.kafka_controller import KafkaController
from twisted_kafka.controller.metadata_store import JsonFileMetadataStore
from twisted_kafka.network.listeners import EndPoint
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.registry import ApiKey

CLUSTER_ID = "unit-test-cluster-id1"


RESPONSES = {ApiKey.LEADER_AND_ISR: m.LeaderAndIsrResponse, ApiKey.UPDATE_METADATA: m.UpdateMetadataResponse,
             ApiKey.STOP_REPLICA: m.StopReplicaResponse}


class FakeChannels:
    """Records every request; answers at once unless ``hold`` is set."""

    def __init__(self, reactor):
        self.reactor = reactor
        self.sent: list[tuple[int, int, object]] = []
        self.added: list[tuple[int, str, int]] = []
        self.removed: list[int] = []
        self.hold = False
        self.closed = False
        self.pending: list[tuple[Deferred, object]] = []

    def add_broker(self, broker_id, host, port, **listener):
        self.added.append((broker_id, host, port))

    def remove_broker(self, broker_id):
        self.removed.append(broker_id)

    def close(self):
        self.closed = True

    def send(self, broker_id, api_key, version, request):
        self.sent.append((broker_id, api_key, request))
        response = RESPONSES[api_key](error_code=0)
        d: Deferred = Deferred()
        if self.hold:
            self.pending.append((d, response))
        else:
            d.callback(response)
        return d

    def release(self):
        pending, self.pending = self.pending, []
        for d, response in pending:
            d.callback(response)

    def kinds(self, broker_id: int | None = None) -> list[int]:
        return [api_key for b, api_key, _ in self.sent if broker_id is None or b == broker_id]

    def requests(self, broker_id: int, api_key: int | None = None) -> list:
        return [r for b, k, r in self.sent if b == broker_id and (api_key is None or k == api_key)]


def run(coroutine):
    """The result of a coroutine that completes synchronously (raises its exception)."""
    d = ensureDeferred(coroutine)
    outcome: list = []
    d.addBoth(outcome.append)
    assert outcome, "the coroutine is still waiting"
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


def live_broker(broker_id: int) -> LiveBroker:
    return LiveBroker(broker_id=broker_id, epoch=1,
                      endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9092 + broker_id, "PLAINTEXT"),),
                      control_listener="PLAINTEXT")


def make_store(tmp_path, reactor=None, pool=None) -> JsonFileMetadataStore:
    return JsonFileMetadataStore(str(tmp_path), reactor=reactor or InlineReactor(), threadpool=pool or SyncThreadPool())


def make_controller(tmp_path, brokers=(0,), *, store=None, **props):
    """A started controller for ``brokers`` (the first is its own); its start-up requests are cleared."""
    reactor = InlineReactor()
    config = KafkaConfig.from_props({"log.dirs": str(tmp_path), **{k: str(v) for k, v in props.items()}})
    store = store or make_store(tmp_path, reactor)
    channels = FakeChannels(reactor)
    controller = KafkaController(config=config, broker_id=brokers[0], cluster_id=CLUSTER_ID, store=store,
                                 channels=channels)
    run(controller.startup([live_broker(b) for b in brokers]))
    channels.sent.clear()
    return controller, channels, reactor
