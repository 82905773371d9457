"""The controller's ACLs: validated, persisted in the store, sent to every broker in UpdateMetadata.

ACL bindings travel in UpdateMetadata's ``acls`` tagged field (tag 1004 of
this project's schema) as the whole set, whenever it changes and to every
broker when the controller starts or a broker joins; a broker holds exactly
the last set it received.
"""

from __future__ import annotations

from twisted_kafka.config import KafkaConfig
from twisted_kafka.controller.broker_request_batch import UPDATE_METADATA_VERSION
from twisted_kafka.controller.kafka_controller import KafkaController
from twisted_kafka.protocol.codec import decode_request, encode_request
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

from .helpers import FakeChannels, InlineReactor, live_broker, make_controller, make_store, run

UM = ApiKey.UPDATE_METADATA
WRITE, READ = AclOperation.WRITE, AclOperation.READ
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(name, op=WRITE, perm=ALLOW, pattern=PatternType.LITERAL, principal="User:alice") -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern), AccessControlEntry(principal, "*", op, perm))


def sent_acls(request) -> set[AclBinding] | None:
    if request.acls is None:
        return None
    return {AclBinding.of(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                          a.permission_type) for a in request.acls}


def everything() -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def test_created_acls_are_persisted_and_sent_to_every_broker(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1))
    results = run(controller.create_acls([acl("t"), acl("logs-", pattern=PatternType.PREFIXED),
                                          acl("", READ)]))
    assert [e for e, _ in results] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert results[2][1] == "Invalid empty resource name specified"
    for broker in (0, 1):
        (request,) = channels.requests(broker, UM)
        assert sent_acls(request) == {acl("t"), acl("logs-", pattern=PatternType.PREFIXED)}
        # The tagged field survives the wire.
        frame = b"".join(encode_request(request, UPDATE_METADATA_VERSION, 1, "controller-0"))[4:]
        assert sent_acls(decode_request(frame, strict=True)[1]) == sent_acls(request)
    stored = run(make_store(tmp_path).load()).acls
    assert stored == {acl("t").pattern: frozenset({acl("t").entry}),
                      acl("logs-", pattern=PatternType.PREFIXED).pattern:
                          frozenset({acl("logs-", pattern=PatternType.PREFIXED).entry})}


def test_delete_removes_what_each_filter_matches(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.create_acls([acl("a"), acl("a", READ, DENY), acl("b")]))
    channels.sent.clear()
    only_denies = AclBindingFilter(ResourceType.TOPIC, None, PatternType.ANY, None, None, AclOperation.ANY, DENY)
    deleted = run(controller.delete_acls([only_denies, only_denies]))
    assert deleted == [[acl("a", READ, DENY)], [acl("a", READ, DENY)]]
    (request,) = channels.requests(0, UM)
    assert sent_acls(request) == {acl("a"), acl("b")}
    assert run(controller.delete_acls([everything()])) == [[acl("a"), acl("b")]]
    assert run(make_store(tmp_path).load()).acls == {}


def test_a_restarted_controller_sends_the_stored_acls(tmp_path):
    controller, _, _ = make_controller(tmp_path)
    run(controller.create_acls([acl("t")]))
    reactor = InlineReactor()
    channels = FakeChannels(reactor)
    again = KafkaController(config=KafkaConfig.from_props({"log.dirs": str(tmp_path)}), broker_id=0,
                            cluster_id="unit-test-cluster-id1", store=make_store(tmp_path, reactor),
                            channels=channels)
    run(again.startup([live_broker(0)]))
    assert sent_acls(channels.requests(0, UM)[0]) == {acl("t")}


def test_creating_nothing_new_writes_nothing(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.create_acls([acl("t")]))
    channels.sent.clear()
    assert run(controller.create_acls([acl("", READ)]))[0][0] == ErrorCode.INVALID_REQUEST
    assert channels.requests(0, UM) == []


def test_acls_changed_elsewhere_are_reloaded_and_sent_only_when_different(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.acls_changed())
    assert channels.requests(0, UM) == []                  # nothing new
    other = make_store(tmp_path)
    run(other.set_acls(acl("x").pattern, frozenset({acl("x").entry})))
    controller.acl_manager._store = other                   # the store as another writer left it
    run(controller.acls_changed())
    (request,) = channels.requests(0, UM)
    assert sent_acls(request) == {acl("x")}
