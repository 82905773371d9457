"""API handlers, one module per API family.

Each handler serves one API key with the collaborators it is built with
(``server.api_table.broker_handlers`` builds the broker's set); shared
logic lives in the server layer (``AdminManager``, ``DynamicBrokerConfig``,
``ReplicaManager``, ``MetadataCache``), never here.
"""
