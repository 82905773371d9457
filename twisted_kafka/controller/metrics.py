"""Kafka's ``kafka.controller:type=KafkaController`` gauges, read from the controller's context.

Every broker has them; as in Kafka, only the active controller reports
anything but 0 (ActiveControllerCount is 1 there and 0 elsewhere, so
``sum(...)`` over a cluster must be exactly 1):

* ``ActiveControllerCount``;
* ``OfflinePartitionsCount``: partitions without a live leader (leader -1, or
  a leader whose broker is not registered), topics being deleted left out --
  Kafka's ``offlinePartitionCount``;
* ``GlobalTopicCount``, ``GlobalPartitionCount``;
* ``PreferredReplicaImbalanceCount``: partitions whose leader is not their
  first replica;
* ``TopicsToDeleteCount``.
"""

from __future__ import annotations

from twisted_kafka.metrics import MetricName, MetricsRegistry

from .kafka_controller import KafkaController


def _offline_partitions(controller: KafkaController) -> int:
    context = controller.context
    live = context.live_brokers
    return sum(1 for topic in context.topics.values() if topic.name not in context.deleting
               for record in topic.partitions.values()
               if record.has_state and (record.leader < 0 or record.leader not in live))


def _imbalanced(controller: KafkaController) -> int:
    context = controller.context
    return sum(1 for topic in context.topics.values() if topic.name not in context.deleting
               for record in topic.partitions.values()
               if record.has_state and record.replicas and record.leader != record.replicas[0])


def register_controller_metrics(metrics: MetricsRegistry, controller: KafkaController) -> None:
    def gauge(name: str, read) -> None:
        metrics.gauge(MetricName("kafka.controller", "KafkaController", name),
                      lambda: read() if controller.active else 0)

    context = controller.context
    metrics.gauge(MetricName("kafka.controller", "KafkaController", "ActiveControllerCount"),
                  lambda: 1 if controller.active else 0)
    gauge("OfflinePartitionsCount", lambda: _offline_partitions(controller))
    gauge("GlobalTopicCount", lambda: len(context.topics))
    gauge("GlobalPartitionCount", lambda: sum(len(t.partitions) for t in context.topics.values()))
    gauge("PreferredReplicaImbalanceCount", lambda: _imbalanced(controller))
    gauge("TopicsToDeleteCount", lambda: len(context.deleting))


__all__ = ["register_controller_metrics"]
