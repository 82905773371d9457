"""twisted_kafka: a broker that speaks Apache Kafka's wire protocol, on Twisted."""

__version__ = "0.1.0.dev0"
