"""The controller: owner of topic and partition state, talking to brokers only
over their control-plane listeners (LeaderAndIsr, UpdateMetadata, StopReplica),
exactly as a ZooKeeper-mode Kafka controller does — a single node is simply a
cluster of one whose controller is its own broker."""
