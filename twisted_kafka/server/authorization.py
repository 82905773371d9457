"""Authorization: the one place a handler asks whether its request may do something.

Kafka's ``AuthHelper`` over the configured authorizer.  Every handler holds
an ``Authorization`` (set by the API table); APIs that need one operation on
the cluster declare it (``ApiHandler.cluster_operation``) and ``KafkaApis``
checks it before the handler runs; APIs on topics and groups check each
resource where they answer per resource.  Without an authorizer
(``authorizer.class.name`` empty) everything is allowed.

A refusal is Kafka's error for the resource type: TOPIC_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, DELEGATION_TOKEN_AUTHORIZATION_FAILED
(``AclEntry.authorizationError``), and is logged at INFO on the
``kafka.authorizer.logger`` namespace as Kafka's authorizer logs denials.
"""

from __future__ import annotations

from collections.abc import Iterable

from twisted.logger import Logger

from twisted_kafka.network.request import RequestContext
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.security.acl import CLUSTER_NAME, AclBinding, AclOperation, ResourceType
from twisted_kafka.security.authorizer import AclAuthorizer

AUTHORIZATION_ERRORS = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def authorization_error(resource_type: ResourceType) -> ErrorCode:
    return AUTHORIZATION_ERRORS[resource_type]


#: Kafka's authorizer logger name (module level: a Logger class attribute takes its class's name).
audit_log = Logger(namespace="kafka.authorizer.logger")


class Authorization:
    def __init__(self, authorizer: AclAuthorizer | None = None):
        self.authorizer = authorizer

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def replace_acls(self, bindings: Iterable[AclBinding]) -> None:
        """The cluster's ACLs as the controller last sent them."""
        if self.authorizer is not None:
            self.authorizer.replace_all(bindings)

    def allowed(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType,
                name: str = CLUSTER_NAME, *, log_denied: bool = True) -> bool:
        """Whether the request may; a denial is logged unless ``log_denied`` is False (a check that has a
        fallback, as Kafka's ``logIfDenied = false``)."""
        if self.authorizer is None:
            return True
        ok = self.authorizer.authorize(context.principal, context.client_host, operation, resource_type, name)
        if not ok and log_denied:
            audit_log.info("Principal = {principal} is Denied Operation = {operation} from host = {host} on "
                          "resource = {rtype}:LITERAL:{name}", principal=context.principal,
                          operation=operation.camel, host=context.client_host, rtype=resource_type.camel, name=name)
        return ok

    def allowed_names(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType,
                      names: Iterable[str], *, log_denied: bool = True) -> set[str]:
        """The ``names`` the request may perform ``operation`` on."""
        return {name for name in names if self.allowed(context, operation, resource_type, name,
                                                       log_denied=log_denied)}

    def authorized_operations(self, context: RequestContext, resource_type: ResourceType, supported,
                              name: str = CLUSTER_NAME) -> set[int]:
        """Of the ``supported`` operation codes of a resource, those the request may perform
        (Kafka's ``authorizedOperations``: DescribeCluster, Metadata, DescribeGroups)."""
        if self.authorizer is None:
            return set(supported)
        return {op for op in supported
                if self.authorizer.authorize(context.principal, context.client_host, AclOperation(op),
                                             resource_type, name)}

    def allowed_on_any(self, context: RequestContext, operation: AclOperation,
                       resource_type: ResourceType) -> bool:
        """Whether the request may perform ``operation`` on some resource of the type (KIP-679's
        check for InitProducerId: IDEMPOTENT_WRITE on the cluster or WRITE on any topic)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_by_resource_type(context.principal, context.client_host, operation,
                                                          resource_type)

    def require(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType,
                name: str = CLUSTER_NAME) -> None:
        """Raise the resource type's authorization error unless allowed (the whole request is refused)."""
        if not self.allowed(context, operation, resource_type, name):
            raise KafkaError(authorization_error(resource_type), None)


#: Without an authorizer: everything is allowed.
ALLOW_ALL = Authorization(None)

__all__ = ["Authorization", "ALLOW_ALL", "authorization_error", "TOPIC", "GROUP", "CLUSTER"]
