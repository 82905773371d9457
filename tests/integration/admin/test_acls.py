"""ACL authorization with real clients: confluent-kafka (librdkafka) and kafka-python.

The broker runs Kafka's ACL authorizer over PLAINTEXT, where every client is
``User:ANONYMOUS``.  ACLs are added through the admin API (CreateAcls), so
the first ones are made while ``allow.everyone.if.no.acl.found`` is on --
the cluster has no ACL yet -- and the broker is restarted with it off (and
``super.users`` unset): from then on only the ACLs decide, and the ones made
before the restart are still there.  Then, without another restart:

* a producer that may describe a topic but not write it gets
  TOPIC_AUTHORIZATION_FAILED from librdkafka;
* an ALLOW of WRITE on a PREFIXED pattern lets it write every topic under
  the prefix, idempotently too (InitProducerId needs WRITE on some topic);
* a DENY of WRITE on one topic wins over that ALLOW;
* kafka-python's admin describes and deletes ACLs, and the deleted DENY no
  longer applies;
* a librdkafka consumer without READ on its group gets
  GROUP_AUTHORIZATION_FAILED, and consumes once that ACL exists.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as CK
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from support.wait import wait_until
from tests.integration.admin.support import confluent_admin, outcomes

pytestmark = pytest.mark.integration

ANON = "User:ANONYMOUS"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


def binding(restype, name, operation, permission=AclPermissionType.ALLOW,
            pattern=ResourcePatternType.LITERAL, principal=ANON) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", operation, permission)


def create(admin, *bindings) -> None:
    for key, outcome in outcomes(admin.create_acls(list(bindings))).items():
        assert outcome is None, (key, outcome)


def produce_error(bootstrap: str, topic: str, **config):
    """Produce one record; the delivery error (None when delivered)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 10000,
                         "topic.metadata.refresh.interval.ms": 500, **config})
    reports: list = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    assert reports, "no delivery report"
    return reports[0]


def write_error_code(bootstrap: str, topic: str):
    err = produce_error(bootstrap, topic)
    return None if err is None else err.code()


def consume_error_code(bootstrap: str, group: str, topic: str):
    """Consume ``topic`` in ``group`` until a record arrives (None) or an error does (its code)."""
    from confluent_kafka import Consumer

    errors: list = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "error_cb": errors.append})
    try:
        consumer.subscribe([topic])

        def outcome():
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                return "record"
            if msg is not None and msg.error().code() != CK._PARTITION_EOF:
                return msg.error().code()
            return errors[0].code() if errors else None
        result = wait_until(outcome, timeout=30, what=f"a record or an error in group {group}")
        return None if result == "record" else result
    finally:
        consumer.close()


def everything() -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def test_acls_decide_what_anonymous_may_do(broker_factory):
    broker = broker_factory(AUTHORIZER)
    admin = confluent_admin(broker)
    # The cluster has no ACL yet: allow.everyone.if.no.acl.found lets ANONYMOUS bootstrap its own rights.
    create(admin, *(binding(ResourceType.BROKER, "kafka-cluster", op)
                    for op in (AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CREATE)),
           binding(ResourceType.TOPIC, "acl-", AclOperation.DESCRIBE, pattern=ResourcePatternType.PREFIXED))
    for name, outcome in outcomes(admin.create_topics([NewTopic(t, 1, 1) for t in
                                                       ("acl-orders", "acl-other")])).items():
        assert outcome is None, (name, outcome)

    broker.overrides["allow.everyone.if.no.acl.found"] = "false"
    broker.restart()
    admin = confluent_admin(broker)
    described = admin.describe_acls(everything()).result(15)
    assert len(described) == 4                                   # the ACLs survived the restart

    # DESCRIBE but no WRITE: librdkafka's producer is refused.
    assert write_error_code(broker.bootstrap, "acl-orders") == CK.TOPIC_AUTHORIZATION_FAILED

    # An ALLOW on the prefix, added through the admin API, applies without a restart.
    create(admin, binding(ResourceType.TOPIC, "acl-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED))
    assert wait_until(lambda: write_error_code(broker.bootstrap, "acl-orders") is None, timeout=30)
    assert write_error_code(broker.bootstrap, "acl-other") is None
    # An idempotent producer: WRITE on some topic is enough for InitProducerId (KIP-679).
    assert produce_error(broker.bootstrap, "acl-other", **{"enable.idempotence": True}) is None

    # DENY wins over ALLOW.
    create(admin, binding(ResourceType.TOPIC, "acl-orders", AclOperation.WRITE, AclPermissionType.DENY))
    assert write_error_code(broker.bootstrap, "acl-orders") == CK.TOPIC_AUTHORIZATION_FAILED
    assert write_error_code(broker.bootstrap, "acl-other") is None

    # kafka-python: DescribeAcls and DeleteAcls.
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as PT
    from kafka.admin import ResourceType as RT

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        deny_filter = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                                permission_type=ACLPermissionType.DENY,
                                resource_pattern=ResourcePatternFilter(RT.TOPIC, None, PT.ANY))
        acls, error = kp.describe_acls(deny_filter)
        assert error.errno == 0
        assert [(a.resource_pattern.resource_name, a.operation) for a in acls] == [("acl-orders",
                                                                                   ACLOperation.WRITE)]
        ((_, deleted, error),) = kp.delete_acls([deny_filter])
        assert error.errno == 0 and [a.resource_pattern.resource_name for a in deleted] == ["acl-orders"]
    finally:
        kp.close()
    assert write_error_code(broker.bootstrap, "acl-orders") is None

    # A consumer group needs READ on the group (and on the topic).
    create(admin, binding(ResourceType.TOPIC, "acl-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED))
    assert consume_error_code(broker.bootstrap, "acl-group", "acl-orders") == CK.GROUP_AUTHORIZATION_FAILED
    create(admin, binding(ResourceType.GROUP, "acl-group", AclOperation.READ))
    assert consume_error_code(broker.bootstrap, "acl-group", "acl-orders") is None
    assert broker.stop() == 0


def test_without_an_authorizer_the_acl_apis_are_disabled(broker_factory):
    broker = broker_factory()
    admin = confluent_admin(broker)
    [outcome] = outcomes(admin.create_acls([binding(ResourceType.TOPIC, "t", AclOperation.READ)])).values()
    assert outcome.args[0].code() == CK.SECURITY_DISABLED
    # (librdkafka answers an empty list for a DescribeAcls error; kafka-python raises it.)
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as PT
    from kafka.admin import ResourceType as RT
    from kafka.errors import SecurityDisabledError

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        with pytest.raises(SecurityDisabledError):
            kp.describe_acls(ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                                       permission_type=ACLPermissionType.ANY,
                                       resource_pattern=ResourcePatternFilter(RT.ANY, None, PT.ANY)))
    finally:
        kp.close()
