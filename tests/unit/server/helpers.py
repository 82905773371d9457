"""A whole single-node broker for handler unit tests, without sockets, threads or wall-clock time.

Everything is the real thing except I/O scheduling:

* ``InlineReactor`` (a ``MemoryReactorClock`` whose ``callFromThread`` runs at
  once) and ``ManualThreadPool`` (runs "thread pool" work on the spot, or holds
  it until the test runs it): every Deferred that would wait for the disk has
  fired when the call returns unless the test holds the pool, and time moves
  only when a test advances the clock;
* a real ``LogManager`` on ``tmp_path``, ``ReplicaManager``, ``MetadataCache``,
  ``ConfigRepository``, ``DynamicBrokerConfig`` (with ``LogDefaults`` and
  ``ConnectionLimits``), ``AdminManager`` over a ``LocalControllerClient``, and
  a ``KafkaController`` on a ``JsonFileMetadataStore`` under the log dir;
* ``InMemoryChannels``: the controller's channel manager, delivering each
  request -- encoded and decoded by the codec, as on the wire -- to this
  broker's own ``KafkaApis`` on its control plane, one at a time per broker,
  in order.  So LeaderAndIsr and UpdateMetadata reach the real handlers, as
  they do over the control-plane listener of a running broker.

Requests given to ``Broker.call`` go through ``encode_request`` /
``decode_request`` and responses through ``decode_response``, so every test
also checks that its request and response survive the codec.
"""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.python.failure import Failure

from support.inline import InlineReactor, ManualThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.controller.client import LocalControllerClient
from twisted_kafka.controller.interface import LiveBroker, NewTopic
from twisted_kafka.controller.kafka_controller import KafkaController
from twisted_kafka.controller.metadata_store import JsonFileMetadataStore
from twisted_kafka.coordinator.group.service import GroupCoordinatorService
from twisted_kafka.coordinator.transaction import FileProducerIdBlockStore, ProducerIdManager
from twisted_kafka.coordinator.transaction.service import TransactionCoordinatorService
from twisted_kafka.log import LogManager
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.network.request import ANONYMOUS, CloseConnectionResponse, Request, RequestContext, SendResponse
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_request, decode_response, encode_request
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.records.builder import build_batch
from twisted_kafka.protocol.registry import REGISTRY
from twisted_kafka.security.authorizer import AclAuthorizer
from twisted_kafka.server.admin_manager import AdminManager
from twisted_kafka.server.api_table import broker_handlers
from twisted_kafka.server.authorization import ALLOW_ALL, Authorization
from twisted_kafka.server.broker_epoch import BrokerEpoch
from twisted_kafka.server.broker_metadata import BrokerMetadata
from twisted_kafka.server.config_repository import ConfigRepository
from twisted_kafka.server.controller_requests import ControllerRequestGuard
from twisted_kafka.server.dynamic_config import (
    ConnectionLimits,
    DynamicBrokerConfig,
    LogDefaults,
    ProducerIdExpiration,
)
from twisted_kafka.server.kafka_apis import KafkaApis
from twisted_kafka.server.metadata_cache import MetadataCache
from twisted_kafka.server.replica_manager import ReplicaManager, Replication

NOW = 1_700_000_000_000   # ms: the clock starts here, so record timestamps are "now"
CLUSTER_ID = "unit-test-cluster-id1"
BROKER_ID = 0
BROKER_EPOCH = 1

BASE_PROPS = {
    "broker.id": str(BROKER_ID),
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "control.plane.listener.name": "CONTROLLER",
}


def result_of(d):
    """The result of a Deferred (or coroutine) that has fired; raises its failure."""
    if not isinstance(d, Deferred):
        d = ensureDeferred(d)
    outcome: list = []
    d.addBoth(outcome.append)
    assert outcome, "still waiting"
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


def context(*, plane: str = "data", listener: str = "PLAINTEXT", client_id: str | None = "unit",
            principal: str = ANONYMOUS) -> RequestContext:
    return RequestContext(connection_id="127.0.0.1:9092-127.0.0.1:50000-0", listener_name=listener,
                          security_protocol="PLAINTEXT", plane=plane, client_host="127.0.0.1", client_port=50000,
                          client_id=client_id, principal=principal)


def make_request(message, version: int, *, correlation_id: int = 7, client_id: str | None = "unit",
                 plane: str = "data", listener: str = "PLAINTEXT", principal: str = ANONYMOUS) -> Request:
    """``message`` at ``version`` as the broker receives it: encoded, then decoded by the codec."""
    frame = b"".join(encode_request(message, version, correlation_id, client_id))[4:]
    header, body = decode_request(frame, strict=True)
    assert (header.api_key, header.api_version, header.correlation_id) == (type(message).API_KEY, version,
                                                                            correlation_id)
    return Request(context=context(plane=plane, listener=listener, client_id=client_id, principal=principal),
                   header=header, body=body,
                   spec=REGISTRY[header.api_key], size=len(frame))


def bodiless_request(api_key: int, version: int, *, correlation_id: int = 7) -> Request:
    """A request whose body was not parsed (KIP-511: ApiVersions at a version the broker lacks)."""
    header = RequestHeader(api_key, version, correlation_id, "unit")
    return Request(context=context(), header=header, body=None, spec=REGISTRY[api_key], size=10)


def response_bytes(response) -> bytes:
    """The frame of a SendResponse, or of the answer a CloseConnectionResponse writes before closing."""
    answered_then_closed = isinstance(response, CloseConnectionResponse) and response.chunks
    assert isinstance(response, SendResponse) or answered_then_closed, f"expected an answer, got {response!r}"
    data = b"".join(bytes(c) for c in response.chunks)
    assert int.from_bytes(data[:4], "big") == len(data) - 4, "the size prefix does not match the frame"
    return data


def decode(request: Request, response, version: int | None = None):
    """The response message of ``response`` (a SendResponse to ``request``), checked for its correlation id."""
    data = response_bytes(response)
    correlation_id, message = decode_response(request.api_key, request.api_version if version is None else version,
                                              data[4:], strict=True)
    assert correlation_id == request.correlation_id
    return message


def decode_at_version(message_class, body: bytes, version: int):
    """``body`` decoded at ``version`` exactly (kafka-python reads every ApiVersions error as v0)."""
    return super(message_class, message_class).decode(body, version=version)


def records(*values: bytes, timestamp: int = NOW, step: int = 0, key: bytes | None = None, **kwargs) -> bytes:
    """One v2 batch with a record per value (timestamps ``timestamp``, ``timestamp + step`` ...),
    each with ``key`` (none by default; a compacted topic needs one)."""
    return build_batch([(key, value, (), timestamp + i * step) for i, value in enumerate(values)], **kwargs)


class InMemoryChannels:
    """The controller's channel manager, delivering to brokers' ``KafkaApis`` in this process.

    Each request is encoded and decoded as on the wire and handled on the
    receiver's control plane.  Requests to one broker are handled one at a
    time, in the order they were sent (Kafka's RequestSendThread); with
    ``hold`` set they wait in the queue until ``release``.
    """

    def __init__(self, reactor):
        self.reactor = reactor
        self.brokers: dict[int, KafkaApis] = {}
        self.sent: list[tuple[int, int, object]] = []     # (broker id, api key, request) in send order
        self.hold = False
        self._queues: dict[int, deque] = {}
        self._busy: set[int] = set()
        self._correlation_id = 0
        self.closed = False
        #: The principal the controller's requests arrive with (its connection's, on the control plane).
        self.principal = ANONYMOUS

    # -- the ControllerChannelManager interface -----------------------------------------

    def add_broker(self, broker_id: int, host: str, port: int, **listener) -> None:
        assert broker_id in self.brokers, f"broker {broker_id} has no KafkaApis here"

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def close(self) -> None:
        self.closed = True

    def send(self, broker_id: int, api_key: int, version: int, request) -> Deferred:
        d: Deferred = Deferred()
        self.sent.append((broker_id, api_key, request))
        self._queues.setdefault(broker_id, deque()).append((version, request, d))
        self._pump(broker_id)
        return d

    # -- test controls ------------------------------------------------------------------

    def release(self) -> None:
        self.hold = False
        for broker_id in list(self._queues):
            self._pump(broker_id)

    def kinds(self, broker_id: int | None = None) -> list[int]:
        return [key for b, key, _ in self.sent if broker_id is None or b == broker_id]

    def clear(self) -> None:
        self.sent.clear()

    # -- delivery -----------------------------------------------------------------------

    def _pump(self, broker_id: int) -> None:
        queue = self._queues[broker_id]
        if self.hold or broker_id in self._busy or not queue:
            return
        version, message, d = queue.popleft()
        self._busy.add(broker_id)
        self._correlation_id += 1
        request = make_request(message, version, correlation_id=self._correlation_id,
                               client_id=f"controller-{BROKER_ID}", plane="control", listener="CONTROLLER",
                               principal=self.principal)
        handled = ensureDeferred(self.brokers[broker_id].handle(request))

        def answered(response):
            self._busy.discard(broker_id)
            if isinstance(response, Failure):
                d.errback(response)
            else:
                d.callback(decode(request, response))
            self._pump(broker_id)

        handled.addBoth(answered)


class Broker:
    """One broker (and its controller) on ``tmp_path``; see the module docstring.

    ``replication_controller``: the ``ControllerClient`` a replicated partition's leader sends its ISR
    changes to -- given, the replica manager replicates as a cluster member's does (its ISR manager and
    fetcher manager built); ``metrics``: where the replica manager registers its metrics.
    """

    def __init__(self, tmp_path, props: dict[str, str] | None = None, *, start: bool = True,
                 replication_controller=None, metrics=None):
        self.tmp_path = tmp_path
        self.reactor = InlineReactor()
        self.reactor.advance(NOW / 1000)
        self.pool = ManualThreadPool(holding=False)
        self.log_dir = str(tmp_path / "logs")
        self.config = KafkaConfig.from_props({**BASE_PROPS, "log.dirs": self.log_dir, **(props or {})})
        self.listeners = parse_listeners(self.config)
        self.dynamic_config = DynamicBrokerConfig(self.config, BROKER_ID)
        self.config_repository = ConfigRepository()
        self.metadata_cache = MetadataCache(listeners=self.listeners)
        self.metadata_cache.set_local_broker(BrokerMetadata(BROKER_ID, CLUSTER_ID))
        self.broker_epoch = BrokerEpoch(BROKER_EPOCH)
        self.log_manager = LogManager(self.config, reactor=self.reactor, threadpool=self.pool,
                                      topic_configs=self.config_repository.topic_overrides,
                                      broker_epoch=lambda: self.broker_epoch.current)
        replication = None
        if replication_controller is not None:
            replication = Replication(self.config, self.metadata_cache, replication_controller, self.broker_epoch)
        self.replica_manager = ReplicaManager(broker_id=BROKER_ID, log_manager=self.log_manager, reactor=self.reactor,
                                              topic_overrides=self.config_repository.topic_overrides,
                                              metrics=metrics, replication=replication)
        self.channels = InMemoryChannels(self.reactor)
        self.store = JsonFileMetadataStore(self.log_dir, reactor=self.reactor, threadpool=self.pool)
        self.controller = KafkaController(config=self.config, broker_id=BROKER_ID, cluster_id=CLUSTER_ID,
                                          store=self.store, channels=self.channels)
        self.controller_client = LocalControllerClient(self.controller)
        self.authorization = Authorization(AclAuthorizer.from_config(self.config))
        # The CONTROLLER listener is PLAINTEXT: this broker's own inter-broker principal is ANONYMOUS,
        # the principal InMemoryChannels delivers the controller's requests with.
        self.own_principal = ANONYMOUS
        self.guard = ControllerRequestGuard(broker_id=BROKER_ID, cluster_id=CLUSTER_ID, broker_epoch=self.broker_epoch,
                                            known_controller=lambda: self.controller_client.controller_id,
                                            authorization=self.authorization,
                                            own_principal=lambda: self.own_principal)
        self.admin_manager = AdminManager(controller=self.controller_client, metadata_cache=self.metadata_cache,
                                          config_repository=self.config_repository,
                                          dynamic_config=self.dynamic_config)
        self.quotas = RecordingQuotas()
        self.dynamic_config.add_reconfigurable(LogDefaults(self.log_manager, self.config_repository))
        self.dynamic_config.add_reconfigurable(ConnectionLimits(self.quotas))
        self.dynamic_config.add_reconfigurable(ProducerIdExpiration(self.log_manager))
        self.producer_ids = ProducerIdManager(BROKER_ID, FileProducerIdBlockStore(
            [self.log_dir], reactor=self.reactor, threadpool=self.pool))
        self.served: dict[str, list[int]] = {}
        self.group_coordinator = GroupCoordinatorService(
            config=self.config, replica_manager=self.replica_manager, admin_manager=self.admin_manager,
            metadata_cache=self.metadata_cache, reactor=self.reactor, broker_id=BROKER_ID)
        self.transaction_coordinator = TransactionCoordinatorService(
            config=self.config, replica_manager=self.replica_manager, admin_manager=self.admin_manager,
            metadata_cache=self.metadata_cache, producer_ids=self.producer_ids,
            group_coordinator=self.group_coordinator.coordinator, sender=None, reactor=self.reactor,
            broker_id=BROKER_ID)
        self.apis = KafkaApis(broker_handlers(
            advertised_keys=self._advertised_keys, replica_manager=self.replica_manager,
            metadata_cache=self.metadata_cache, admin_manager=self.admin_manager,
            config_repository=self.config_repository, dynamic_config=self.dynamic_config,
            controller=self.controller_client, controller_guard=self.guard,
            group_coordinator=self.group_coordinator.coordinator, offsets_topic=self.group_coordinator,
            transactions=self.transaction_coordinator, producer_ids=self.producer_ids, clock=self.reactor,
            authorization=self.authorization),
            authorization=self.authorization)
        self.channels.brokers[BROKER_ID] = self.apis
        if start:
            self.start()

    def _advertised_keys(self, ctx: RequestContext) -> list[int]:
        return self.served.get(ctx.plane, self.apis.served_keys)

    def registration(self) -> LiveBroker:
        return LiveBroker(broker_id=BROKER_ID, epoch=BROKER_EPOCH, endpoints=self.listeners.advertised,
                          control_listener="CONTROLLER")

    def start(self) -> None:
        result_of(self.log_manager.startService())
        self.group_coordinator.startService()
        self.transaction_coordinator.startService()
        result_of(self.controller.startup([self.registration()]))

    # -- requests -----------------------------------------------------------------------

    def handle(self, message, version: int, **kwargs):
        """The Response KafkaApis answers ``message`` at ``version`` with (it must have answered)."""
        request = make_request(message, version, **kwargs)
        return request, result_of(self.apis.handle(request))

    def call(self, message, version: int, **kwargs):
        """The decoded response message to ``message`` at ``version``."""
        request, response = self.handle(message, version, **kwargs)
        return decode(request, response)

    def pending(self, message, version: int, **kwargs):
        """(request, Deferred of the Response) for a request that may wait."""
        request = make_request(message, version, **kwargs)
        return request, ensureDeferred(self.apis.handle(request))

    # -- shortcuts ----------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None):
        [result] = result_of(self.controller_client.create_topics([NewTopic(name, partitions, 1,
                                                                            configs=dict(configs or {}))]))
        assert result.error == 0, result
        return result.topic_id

    def produce(self, topic: str, partition: int, *values: bytes, **kwargs) -> int:
        """Append ``values`` as one batch; the base offset."""
        replicas = self.replica_manager
        info = result_of(replicas.append(replicas.leader_partition(topic, partition),
                                         records(*values, **kwargs), 9))
        return info.first_offset

    def leader_and_isr(self, topic: str, partition: int, *, leader: int = BROKER_ID, leader_epoch: int,
                       partition_epoch: int | None = None, replicas=(BROKER_ID,), isr=(BROKER_ID,),
                       topic_id=None, controller_epoch: int | None = None, version: int = 7):
        """Send LeaderAndIsr for one partition, as the controller would (on the control plane); the response."""
        LR = m.LeaderAndIsrRequest
        TS = LR.LeaderAndIsrTopicState
        state = TS.LeaderAndIsrPartitionState(
            partition_index=partition, controller_epoch=self.controller.epoch, leader=leader,
            leader_epoch=leader_epoch, isr=list(isr), partition_epoch=leader_epoch if partition_epoch is None
            else partition_epoch, replicas=list(replicas), adding_replicas=[], removing_replicas=[], is_new=False)
        if topic_id is None:
            topic_id = self.metadata_cache.topics[topic].topic_id
        request = LR(controller_id=BROKER_ID, controller_epoch=self.controller.epoch if controller_epoch is None
                     else controller_epoch, broker_epoch=BROKER_EPOCH, broker_id=BROKER_ID, cluster_id=CLUSTER_ID,
                     topic_states=[TS(topic_name=topic, topic_id=topic_id, partition_states=[state])], live_leaders=[])
        return self.call(request, version, plane="control", listener="CONTROLLER")

    def log(self, topic: str, partition: int = 0):
        return self.log_manager.get_log(topic, partition)


class RecordingQuotas:
    """ConnectionQuotas as ``ConnectionLimits`` sees it: the limits it was last given."""

    def __init__(self):
        self.updates: list[KafkaConfig] = []

    def update_limits(self, config: KafkaConfig) -> None:
        self.updates.append(config)


def served_api_keys() -> list[int]:
    """The API keys of the broker's handler table (its handlers only store their collaborators)."""
    return sorted(handler.api_key for handler in broker_handlers(
        advertised_keys=None, replica_manager=None, metadata_cache=None, admin_manager=None,  # type: ignore[arg-type]
        config_repository=None, dynamic_config=None, controller=None, controller_guard=None,  # type: ignore[arg-type]
        group_coordinator=None, offsets_topic=None, producer_ids=None, clock=None,  # type: ignore[arg-type]
        transactions=SimpleNamespace(coordinator=None, marker_writer=None),  # type: ignore[arg-type]
        authorization=ALLOW_ALL))
