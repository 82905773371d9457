"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): the cluster's ACL bindings.

As Kafka's ``AclApis``:

* without an authorizer every request is answered SECURITY_DISABLED, "No
  Authorizer is configured.";
* DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER
  (CLUSTER_AUTHORIZATION_FAILED for the whole request otherwise);
* a filter holding an UNKNOWN value is INVALID_REQUEST (DescribeAcls: the
  whole answer; DeleteAcls: that filter); a creation that is not a concrete
  binding -- ANY or UNKNOWN values, a MATCH or ANY pattern type, a cluster
  resource not named ``kafka-cluster``, an empty name, a principal that is
  not ``<type>:<name>`` -- is INVALID_REQUEST for that creation alone;
* DescribeAcls answers the bindings this broker holds, grouped by resource
  pattern; v0 (no pattern types) describes LITERAL patterns only, as its
  filter means LITERAL;
* creations and deletions are the controller's: it persists them and every
  broker holds the new set before the answer (a broker that is not the
  controller forwards the request to it; a forwarded one is never passed on).
"""

from __future__ import annotations

from twisted_kafka.controller.client import ControllerClient, forwarded
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclBinding, AclBindingFilter, AclOperation

from ..api_handler import ApiHandler
from ..authorization import Authorization

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured."


def _require_authorizer(handler: ApiHandler) -> None:
    if not handler.authorization.enabled:
        raise KafkaError(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)


class DescribeAclsHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_ACLS
    cluster_operation = AclOperation.DESCRIBE

    def __init__(self, *, authorization: Authorization):
        self.authorization = authorization

    async def handle(self, request):
        _require_authorizer(self)
        body = request.body
        selector = AclBindingFilter.of(body.resource_type_filter, body.resource_name_filter,
                                       body.pattern_type_filter, body.principal_filter, body.host_filter,
                                       body.operation, body.permission_type)
        reason = selector.invalid_reason()
        if reason is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, reason)
        authorizer = self.authorization.authorizer
        assert authorizer is not None
        grouped: dict = {}
        for binding in authorizer.acls(selector):
            grouped.setdefault(binding.pattern, []).append(binding.entry)
        R = m.DescribeAclsResponse
        D = R.DescribeAclsResource
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
            D(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
              acls=[D.AclDescription(principal=e.principal, host=e.host, operation=e.operation,
                                     permission_type=e.permission) for e in entries])
            for p, entries in sorted(grouped.items())])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.DescribeAclsResponse(throttle_time_ms=0, error_code=error, error_message=message, resources=[])


class CreateAclsHandler(ApiHandler):
    api_key = ApiKey.CREATE_ACLS
    cluster_operation = AclOperation.ALTER

    def __init__(self, controller: ControllerClient, *, authorization: Authorization):
        self.authorization = authorization
        self.controller = controller

    async def handle(self, request):
        _require_authorizer(self)
        bindings = [AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                                  c.operation, c.permission_type) for c in request.body.creations]
        request.mark_local_complete()
        results = await self.controller.create_acls(
            bindings, forward=not forwarded(request.client_id)) if bindings else []
        R = m.CreateAclsResponse
        return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=error, error_message=message)
                                              for error, message in results])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        R = m.CreateAclsResponse
        return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=error, error_message=message)
                                              for _ in request.body.creations])


class DeleteAclsHandler(ApiHandler):
    api_key = ApiKey.DELETE_ACLS
    cluster_operation = AclOperation.ALTER

    def __init__(self, controller: ControllerClient, *, authorization: Authorization):
        self.authorization = authorization
        self.controller = controller

    async def handle(self, request):
        _require_authorizer(self)
        filters = [AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                       f.principal_filter, f.host_filter, f.operation, f.permission_type)
                   for f in request.body.filters]
        valid = [f for f in filters if f.invalid_reason() is None]
        request.mark_local_complete()
        deleted = iter(await self.controller.delete_acls(valid, forward=not forwarded(request.client_id))
                       if valid else [])
        R = m.DeleteAclsResponse
        F = R.DeleteAclsFilterResult
        A = F.DeleteAclsMatchingAcl
        results = []
        for selector in filters:
            reason = selector.invalid_reason()
            if reason is not None:
                results.append(F(error_code=ErrorCode.INVALID_REQUEST, error_message=reason, matching_acls=[]))
                continue
            results.append(F(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
                A(error_code=ErrorCode.NONE, error_message=None, resource_type=b.pattern.resource_type,
                  resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                  host=b.entry.host, operation=b.entry.operation, permission_type=b.entry.permission)
                for b in next(deleted)]))
        return R(throttle_time_ms=0, filter_results=results)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        R = m.DeleteAclsResponse
        return R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=error, error_message=message, matching_acls=[])
            for _ in request.body.filters])
