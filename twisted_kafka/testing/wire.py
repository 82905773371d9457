"""The few admin requests a test broker's owner sends, over one blocking socket.

``EmbeddedBroker.create_topic`` and friends must work in any test process:
one without confluent-kafka, one whose event loop is asyncio's, one that
must not import Twisted's reactor.  So they speak Kafka's protocol here, on
a plain socket, through the project's own sans-IO codec
(``protocol/client_connection.py`` frames the requests and matches the
responses, as it does for the broker's own client): CreateTopics,
DeleteTopics, Metadata and AlterUserScramCredentials, to a listener that
needs no authentication (the data listener of a PLAINTEXT broker, the
INTERNAL listener of a secured one).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Mapping

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.client_connection import ClientConnection, ResponseReceived
from twisted_kafka.protocol.connection import NEED_DATA
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.sasl.scram_credentials import MECHANISMS, salted_password

__all__ = ["AdminConnection", "AdminError"]

#: The versions sent: within what the broker advertises (protocol/registry.py) and what every field used needs.
CREATE_TOPICS_VERSION = 5
DELETE_TOPICS_VERSION = 4
METADATA_VERSION = 4
ALTER_SCRAM_VERSION = 0
#: AlterUserScramCredentials' mechanism numbers (KIP-554).
_SCRAM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
#: Iterations of the credentials made here: Kafka's minimum, 4096.
SCRAM_ITERATIONS = 4096


class AdminError(RuntimeError):
    """The broker refused an admin request; ``code`` is Kafka's error name (e.g. TOPIC_ALREADY_EXISTS)."""

    def __init__(self, what: str, code: int, message: str | None):
        try:
            self.code = ErrorCode(code).name
        except ValueError:
            self.code = str(code)
        super().__init__(f"{what}: {self.code}" + (f" ({message})" if message else ""))


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class AdminConnection:
    """One connection to ``host:port``; each call sends one request and waits for its answer."""

    def __init__(self, host: str, port: int, *, timeout: float = 30.0):
        self.timeout = timeout
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._connection = ClientConnection(client_id="twisted_kafka.testing")

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> AdminConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, body, version: int):
        _, chunks = self._connection.send_request(body, version)
        self._sock.sendall(b"".join(chunks))
        while True:
            event = self._connection.next_event()
            if isinstance(event, ResponseReceived):
                return event.body
            if event is not NEED_DATA:
                raise ConnectionError(f"broker answer not understood: {getattr(event, 'message', event)}")
            data = self._sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self._connection.receive_data(data)

    # -- topics -----------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     config: Mapping[str, object] | None = None) -> None:
        topic = m.CreateTopicsRequest.CreatableTopic
        request = m.CreateTopicsRequest(topics=[topic(
            name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
            configs=[topic.CreatableTopicConfig(name=str(k), value=str(v)) for k, v in (config or {}).items()])],
            timeout_ms=int(self.timeout * 1000), validate_only=False)
        result = self.request(request, CREATE_TOPICS_VERSION).topics[0]
        if result.error_code != ErrorCode.NONE:
            raise AdminError(f"CreateTopics {name!r}", result.error_code, result.error_message)

    def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        response = self.request(m.DeleteTopicsRequest(topic_names=names, timeout_ms=int(self.timeout * 1000)),
                                DELETE_TOPICS_VERSION)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"DeleteTopics {result.name!r}", result.error_code, None)

    def metadata(self, topics: list[str] | None = None):
        wanted = None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        return self.request(m.MetadataRequest(topics=wanted, allow_auto_topic_creation=False), METADATA_VERSION)

    def topic_names(self) -> list[str]:
        return sorted(topic.name for topic in self.metadata().topics)

    def wait_for_leaders(self, name: str, partitions: int | None = None, timeout: float | None = None) -> None:
        """Wait until Metadata shows every partition of ``name`` with a leader (producers can send at once)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            topic = self.metadata([name]).topics[0]
            led = [p for p in topic.partitions if p.error_code == ErrorCode.NONE and p.leader_id >= 0]
            if topic.error_code == ErrorCode.NONE and led and len(led) == len(topic.partitions) and (
                    partitions is None or len(led) >= partitions):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has no leader for every partition yet: "
                                   f"{_error_name(topic.error_code)}, {len(led)} of {len(topic.partitions)} led")
            time.sleep(0.005)      # between two Metadata requests

    # -- SCRAM users --------------------------------------------------------------------

    def add_scram_user(self, user: str, password: str, mechanisms: Iterable[str] = tuple(_SCRAM_TYPES)) -> None:
        """Create (or replace) ``user``'s SCRAM credentials (KIP-554: only the salted password travels)."""
        import os

        upsertions = []
        for name in mechanisms:
            salt = os.urandom(32)
            upsertions.append(m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=user, mechanism=_SCRAM_TYPES[name], iterations=SCRAM_ITERATIONS, salt=salt,
                salted_password=salted_password(MECHANISMS[name], password, salt, SCRAM_ITERATIONS)))
        response = self.request(m.AlterUserScramCredentialsRequest(deletions=[], upsertions=upsertions),
                                ALTER_SCRAM_VERSION)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"AlterUserScramCredentials {result.user!r}", result.error_code,
                                 result.error_message)
