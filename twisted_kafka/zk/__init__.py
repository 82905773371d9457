"""ZooKeeper, the way Kafka's ZooKeeper mode uses it.

* ``client`` -- ``ZkClient``: kazoo's asynchronous API on the Twisted reactor
  (operations as Deferreds, watches and session changes delivered on the
  reactor), the only place kazoo's threads meet the reactor;
* ``data`` -- Kafka's znode paths and JSON formats (``kafka.zk.ZkData``);
* ``registration`` -- a broker's identity and presence: the cluster id
  (``/cluster/id``), generated broker ids (``/brokers/seqid``), and the
  ephemeral ``/brokers/ids/<id>`` registration whose czxid is the broker
  epoch, kept through session expiry;
* ``admin`` -- what any broker's admin writes for the controller to act on
  (Kafka's ``AdminZkClient``): topic assignments, deletion requests, new
  partitions, configs and their change notifications;
* ``scram_store`` -- SCRAM credentials in ``/config/users`` for every broker;
* ``session`` -- ``ZooKeeperSession``: the session as a child service of the broker, closed last.

The controller's own state (``ZkMetadataStore``) and the controller election
live in ``twisted_kafka/controller``, which owns that state.
"""
