"""A real Kafka broker for tests: ``EmbeddedBroker``, ``EmbeddedCluster`` and a pytest plugin.

    from twisted_kafka.testing import EmbeddedBroker

    with EmbeddedBroker() as broker:
        broker.create_topic("orders")
        ...   # any Kafka client, bootstrap.servers = broker.bootstrap_servers

The pytest plugin (``twisted_kafka.testing.pytest_plugin``, registered under
the ``pytest11`` entry point as ``twisted_kafka``) gives the fixtures
``kafka_broker``, ``kafka_bootstrap_servers``, ``kafka_topic``,
``kafka_admin``, ``kafka_client_config`` and ``kafka_cluster``:
docs/testing.md.

Importing this package imports neither Twisted nor a Kafka client: the
broker runs in a child process, and the admin requests of
``create_topic``/``delete_topic`` go through the project's sans-IO codec on
a blocking socket.
"""

from .embedded import (
           SASL_MECHANISMS,
           SECURITY_PROTOCOLS,
           TEST_DEFAULTS,
           EmbeddedBroker,
           EmbeddedCluster,
           unique_topic_name,
)
from .process import BrokerStartupError
from .zookeeper import ZooKeeperUnavailable

__all__ = ["EmbeddedBroker", "EmbeddedCluster", "BrokerStartupError", "ZooKeeperUnavailable", "TEST_DEFAULTS",
           "SECURITY_PROTOCOLS", "SASL_MECHANISMS", "unique_topic_name"]
