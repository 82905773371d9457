"""This project's own Kafka message schemas (JSON, in Kafka's message-definition format).

kafka-python 3 ships the client-facing APIs only. The four ZooKeeper-mode
controller APIs the controller and brokers exchange over the control plane
(LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) and
AlterPartition (a partition leader's ISR change, sent to the controller) are defined
here from Kafka's protocol specification and loaded through kafka-python's
``load_json=`` hook (see ``twisted_kafka.protocol.messages``). Passing this
package to that hook makes kafka-python read ``<ClassName>.json`` from this
directory.
"""
