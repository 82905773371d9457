"""Operator command-line tools with Apache Kafka's names, flags and output, so runbooks carry over.

One module per tool, each a console script (``setup.cfg``) and a ``bin/`` wrapper:

==========================================  ============================================
``twisted-kafka-topics``                    Kafka's ``kafka-topics.sh`` (``TopicCommand``)
``twisted-kafka-consumer-groups``           ``kafka-consumer-groups.sh`` (``ConsumerGroupCommand``)
``twisted-kafka-configs``                   ``kafka-configs.sh`` (``ConfigCommand``)
``twisted-kafka-acls``                      ``kafka-acls.sh`` (``AclCommand``)
``twisted-kafka-reassign-partitions``       ``kafka-reassign-partitions.sh``
``twisted-kafka-leader-election``           ``kafka-leader-election.sh``
``twisted-kafka-log-dirs``                  ``kafka-log-dirs.sh``
``twisted-kafka-console-producer``          ``kafka-console-producer.sh``
``twisted-kafka-console-consumer``          ``kafka-console-consumer.sh``
``twisted-kafka-scram``                     ``kafka-configs.sh --entity-type users`` (SCRAM
                                            credentials; also a stopped broker's file and ZooKeeper)
==========================================  ============================================

They speak the Kafka protocol to any broker through confluent-kafka (librdkafka); the few admin
APIs librdkafka does not expose (partition reassignments, log directories, offset deletion,
client quotas) go through kafka-python's admin client, with the same connection settings.
Shared pieces: ``command`` (flags, one-line errors, exit codes), ``client_config``
(``--bootstrap-server`` and ``--command-config`` into each client's settings), ``admin``
(the clients), ``errors`` (a failure on one line), ``output`` (Kafka's printed forms).
docs/tools.md is the manual.
"""
