"""The broker: ``KafkaServer`` (a MultiService), its handler pools, ``KafkaApis``
and the API handlers, and the ``MetadataCache`` they answer from."""
