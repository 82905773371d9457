"""KafkaApis: every outcome of a handler becomes exactly one of Kafka's response kinds.

The dispatch rules are tested with small handlers returning each outcome;
the last test sends every served API, at every advertised version, through
the real handler table of a single-node broker and decodes the answer.
"""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import globalLogPublisher

from twisted_kafka.network.processor import CloseReason
from twisted_kafka.network.request import (
    CloseConnectionResponse,
    ConnectionUpdate,
    NoOpResponse,
    SendResponse,
)
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_response
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import REGISTRY, ApiKey
from twisted_kafka.server.api_handler import NO_RESPONSE, ApiHandler, CloseConnection, Encoded, Reply
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.kafka_apis import KafkaApis

from .helpers import Broker, decode, decode_at_version, make_request, response_bytes, result_of, served_api_keys

R = m.DescribeClusterResponse


def cluster_response(error=ErrorCode.NONE, message=None, cluster_id="c"):
    return R(throttle_time_ms=0, error_code=error, error_message=message, endpoint_type=1, cluster_id=cluster_id,
             controller_id=-1, brokers=[], authorized_operations=None)


class Scripted(ApiHandler):
    """A DescribeCluster handler whose ``handle`` returns (or raises) what the test says."""

    api_key = ApiKey.DESCRIBE_CLUSTER

    def __init__(self, outcome, *, error_response_fails=False, version=None):
        self.outcome = outcome
        self.error_response_fails = error_response_fails
        self.version = version
        self.errors: list[tuple[ErrorCode, str | None]] = []

    async def handle(self, request):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def error_response(self, request, error, message=None):
        self.errors.append((error, message))
        if self.error_response_fails:
            raise RuntimeError("no error response either")
        return cluster_response(error, message)

    def response_version(self, request):
        return request.api_version if self.version is None else self.version


class RecordingMetrics:
    def __init__(self):
        self.errors = []

    def record_errors(self, request, counts):
        for code, count in counts.items():
            self.errors += [(request.spec.name, ErrorCode(code).name)] * count


@pytest.fixture
def logged():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def serve(handler, version=1):
    metrics = RecordingMetrics()
    apis = KafkaApis([handler], request_metrics=metrics, authorization=ALLOW_ALL)
    request = make_request(m.DescribeClusterRequest(include_cluster_authorized_operations=False), version)
    response = result_of(apis.handle(request))
    return request, response, metrics


def failures(events):
    return [e for e in events if "log_failure" in e]


def test_a_response_object_is_encoded_at_the_handlers_response_version():
    request, response, metrics = serve(Scripted(cluster_response(cluster_id="abc")))
    assert isinstance(response, SendResponse) and response.request is request and response.update is None
    assert decode(request, response).cluster_id == "abc"
    assert request.remote_complete_ns > 0
    assert metrics.errors == [("DescribeCluster", "NONE")]         # every response counts its codes

    request, response, _ = serve(Scripted(cluster_response(cluster_id="old"), version=0), version=1)
    _, body = decode_response(ApiKey.DESCRIBE_CLUSTER, 0, response_bytes(response)[4:], strict=True)
    assert body.cluster_id == "old"


def test_encoded_chunks_are_sent_as_they_are_and_their_error_codes_counted():
    chunks = [b"\x00\x00\x00\x04", b"abcd"]
    _, response, metrics = serve(Scripted(Encoded(chunks, {ErrorCode.NONE: 2, ErrorCode.LEADER_NOT_AVAILABLE: 1})))
    assert isinstance(response, SendResponse) and response.chunks is chunks
    assert sorted(metrics.errors) == [("DescribeCluster", "LEADER_NOT_AVAILABLE"), ("DescribeCluster", "NONE"),
                                      ("DescribeCluster", "NONE")]


def test_no_response_is_a_noop_and_close_connection_closes_gracefully():
    request, response, _ = serve(Scripted(NO_RESPONSE))
    assert isinstance(response, NoOpResponse) and response.request is request and response.update is None

    request, response, _ = serve(Scripted(CloseConnection(CloseReason.PRODUCE_ERROR, "acks=0 failed")))
    assert isinstance(response, CloseConnectionResponse) and response.request is request
    assert (response.reason, response.message, response.graceful) == (CloseReason.PRODUCE_ERROR, "acks=0 failed",
                                                                       True)


def test_a_reply_carries_its_connection_update():
    update = ConnectionUpdate(sasl_handshake="framed")
    request, response, _ = serve(Scripted(Reply(cluster_response(cluster_id="r"), update)))
    assert isinstance(response, SendResponse) and response.update is update
    assert decode(request, response).cluster_id == "r"

    done = ConnectionUpdate(authenticated_principal="User:alice")
    _, response, _ = serve(Scripted(Reply(NO_RESPONSE, done)))
    assert isinstance(response, NoOpResponse) and response.update is done


def test_a_kafka_error_answers_with_the_handlers_error_response():
    handler = Scripted(KafkaError(ErrorCode.NOT_CONTROLLER, "not me"))
    request, response, metrics = serve(handler)
    assert handler.errors == [(ErrorCode.NOT_CONTROLLER, "not me")]
    body = decode(request, response)
    assert (body.error_code, body.error_message) == (ErrorCode.NOT_CONTROLLER, "not me")
    assert metrics.errors == [("DescribeCluster", "NOT_CONTROLLER")]


def test_an_expired_request_is_answered_with_the_handlers_error_response():
    """What the handler pool sends for a request whose handler has not finished when the broker stops."""
    handler = Scripted(cluster_response())
    metrics = RecordingMetrics()
    apis = KafkaApis([handler], request_metrics=metrics, authorization=ALLOW_ALL)
    request = make_request(m.DescribeClusterRequest(include_cluster_authorized_operations=False), 1)
    response = apis.error_answer(request, ErrorCode.REQUEST_TIMED_OUT, "after the drain")
    assert isinstance(response, SendResponse) and response.request is request
    body = decode(request, response)
    assert (body.error_code, body.error_message) == (ErrorCode.REQUEST_TIMED_OUT, "after the drain")
    assert metrics.errors == [("DescribeCluster", "REQUEST_TIMED_OUT")] and request.remote_complete_ns > 0


def test_a_handler_failing_after_its_request_was_expired_is_one_line_not_a_traceback(logged):
    """The fuzzer's finding: an IncrementalAlterConfigs expired at the end of the drain failed when the
    stop closed the controller's channel it waited on, and that was logged as a critical traceback."""
    gate: Deferred = Deferred()

    class Waiting(Scripted):
        async def handle(self, request):
            await gate
            return cluster_response()

    apis = KafkaApis([Waiting(None)], request_metrics=RecordingMetrics(), authorization=ALLOW_ALL)
    request = make_request(m.DescribeClusterRequest(include_cluster_authorized_operations=False), 1)
    handled = ensureDeferred(apis.handle(request))
    apis.error_answer(request, ErrorCode.REQUEST_TIMED_OUT, "after the drain")
    request.released = True                           # the channel sent that answer
    gate.errback(ConnectionError("channel to broker 0 closed"))
    assert isinstance(result_of(handled), NoOpResponse)
    assert failures(logged) == []
    [line] = [e for e in logged if "expired earlier" in e.get("log_format", "")]
    assert "channel to broker 0 closed" in repr(line["error"])


def test_any_other_exception_is_an_unknown_server_error_and_is_logged(logged):
    handler = Scripted(ZeroDivisionError("bug"))
    request, response, metrics = serve(handler)
    assert handler.errors == [(ErrorCode.UNKNOWN_SERVER_ERROR, None)]
    assert decode(request, response).error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert metrics.errors == [("DescribeCluster", "UNKNOWN_SERVER_ERROR")]
    [event] = failures(logged)
    assert event["log_failure"].check(ZeroDivisionError) and event["request"] is request


def test_a_failing_error_response_closes_the_connection(logged):
    request, response, metrics = serve(Scripted(KafkaError(ErrorCode.INVALID_REQUEST), error_response_fails=True))
    assert isinstance(response, CloseConnectionResponse)
    assert response.reason == CloseReason.PROTOCOL_ERROR and "INVALID_REQUEST" in response.message
    assert metrics.errors == [("DescribeCluster", "INVALID_REQUEST")]       # counted though no response carries it
    assert failures(logged)


def test_an_unencodable_response_closes_the_connection_at_once(logged):
    request, response, _ = serve(Scripted(m.MetadataResponse(brokers=[], topics=[])))   # another API's class
    assert isinstance(response, CloseConnectionResponse) and response.request is request
    assert (response.reason, response.graceful) == (CloseReason.PROTOCOL_ERROR, False)
    [event] = failures(logged)
    assert event["request"] is request


def test_the_table_is_what_is_served():
    handler = Scripted(NO_RESPONSE)
    apis = KafkaApis([handler], authorization=ALLOW_ALL)
    assert apis.served_keys == [ApiKey.DESCRIBE_CLUSTER]
    assert apis.served_spec(ApiKey.DESCRIBE_CLUSTER) is REGISTRY[ApiKey.DESCRIBE_CLUSTER]
    assert apis.served_spec(ApiKey.PRODUCE) is None

    class Unknown(Scripted):
        api_key = 9999

    with pytest.raises(ValueError):
        KafkaApis([handler, Unknown(NO_RESPONSE)], authorization=ALLOW_ALL)


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    node = Broker(tmp_path_factory.mktemp("every-api"))
    node.create_topic("t")
    return node


SERVED = [(key, version) for key in served_api_keys()
          for version in range(REGISTRY[key].min_version, REGISTRY[key].max_version + 1)]


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{REGISTRY[k].name}-v{v}" for k, v in SERVED])
def test_every_served_api_answers_a_default_request_at_every_version(shared_node, api_key, version):
    """A request with every field at its default gets one answer, which decodes."""
    spec = REGISTRY[api_key]
    request, response = shared_node.handle(spec.request_class(), version, plane="control", listener="CONTROLLER")
    if api_key == ApiKey.PRODUCE:
        # The default acks is 0: nothing is answered; v0-v2 are refused by closing the connection.
        assert isinstance(response, CloseConnectionResponse if version < 3 else NoOpResponse)
        return
    if api_key == ApiKey.API_VERSIONS and version >= 3:
        # v3+ must name the client software: INVALID_REQUEST, at the request's version.
        body = decode_at_version(m.ApiVersionsResponse, response_bytes(response)[8:], version)
        assert body.error_code == ErrorCode.INVALID_REQUEST
        return
    body = decode(request, response)
    if api_key == ApiKey.INIT_PRODUCER_ID:
        # The default transactional id is "", which Kafka refuses; v3+ default to id and epoch -1.
        assert (body.error_code, body.producer_id) == (ErrorCode.INVALID_REQUEST, -1)
        return
    if api_key in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
        # The transactional id "" is refused as Kafka's coordinator refuses it.
        assert body.error_code == ErrorCode.INVALID_REQUEST
        return
    # A default controller request names no controller, broker or epoch: refused, but answered.
    # A default group request names the group "" (INVALID_GROUP_ID where a group id is required),
    # whose offsets partition does not exist here yet (NOT_COORDINATOR); SyncGroup v5+ without a
    # protocol type and name is INCONSISTENT_GROUP_PROTOCOL.  DescribeAcls without an authorizer
    # is SECURITY_DISABLED.  ConsumerGroupHeartbeat with an empty group id is INVALID_REQUEST, as in
    # Kafka ("GroupId can't be empty.").  SASL requests reaching KafkaApis come from a connection that needs no
    # authentication or has it already: ILLEGAL_SASL_STATE, as Kafka answers.
    if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        assert body.error_code == ErrorCode.INVALID_REQUEST and body.error_message == "GroupId can't be empty."
        return
    assert getattr(body, "error_code", ErrorCode.NONE) in (ErrorCode.NONE, ErrorCode.STALE_CONTROLLER_EPOCH,
                                                           ErrorCode.ILLEGAL_SASL_STATE,
                                                           ErrorCode.BROKER_NOT_AVAILABLE,
                                                           ErrorCode.STALE_BROKER_EPOCH, ErrorCode.NOT_COORDINATOR,
                                                           ErrorCode.INVALID_GROUP_ID,
                                                           ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                                           ErrorCode.SECURITY_DISABLED)
