"""The broker's Kafka client: one Twisted protocol for every connection a broker makes to a broker.

The controller's channels to brokers' control planes use it (and a replica
fetcher will): ``connect()`` reaches a listener through the endpoint of its
security protocol, and ``KafkaClientProtocol.request()`` pipelines requests
over the sans-IO ``twisted_kafka.protocol.client_connection.ClientConnection``,
which does all the framing and response matching.
"""

from .connector import client_endpoint, connect, endpoint_description
from .errors import ConnectFailed, ConnectionLost, KafkaConnectionError, ProtocolViolationError
from .protocol import KafkaClientFactory, KafkaClientProtocol, describe_address

__all__ = [
    "connect", "client_endpoint", "endpoint_description",
    "KafkaClientProtocol", "KafkaClientFactory", "describe_address",
    "KafkaConnectionError", "ConnectFailed", "ConnectionLost", "ProtocolViolationError",
]
