"""AlterConfigs (33) and IncrementalAlterConfigs (44): change topic and broker configs.

AlterConfigs replaces all the dynamic configs of a resource with the ones
given; IncrementalAlterConfigs edits them key by key: SET (0), DELETE (1),
APPEND (2) and SUBTRACT (3), the last two only for list-typed keys
(INVALID_CONFIG otherwise; the list starts from the current override, else
the key's default).  With ``validate_only`` everything is checked and
nothing changes.  Each resource succeeds or fails alone; a resource given
twice is INVALID_REQUEST.

* TOPIC (2): the new overrides are checked (an unknown key or a bad value is
  INVALID_CONFIG naming the key; an unknown topic UNKNOWN_TOPIC_OR_PARTITION),
  persisted by the controller and applied at once to the topic's logs
  (retention, segment size, flush policy ...).
* BROKER (4), named with this broker's id (per-broker layer) or "" (cluster
  default): only the keys some part of the broker applies at runtime are
  accepted -- any other key is INVALID_REQUEST "Cannot update these configs
  dynamically: <keys>" -- persisted by the controller (they survive a
  restart) and applied live; see ``server.dynamic_config``.  Another broker
  id is INVALID_REQUEST.
* BROKER_LOGGER (8), named with this broker's id, IncrementalAlterConfigs
  only (KIP-412): SET gives a logger a level (TRACE, DEBUG, INFO, WARN, ERROR,
  FATAL), DELETE removes it so the logger follows its parent's (the root's
  cannot be removed: INVALID_REQUEST).  A name that is no logger, or a level
  that is none, is INVALID_CONFIG; APPEND and SUBTRACT are INVALID_REQUEST.
  Applied at once by this broker, not stored: levels last until restart, as
  in Kafka (``AdminManager.alter_broker_loggers``).  AlterConfigs refuses
  BROKER_LOGGER with INVALID_REQUEST before authorization, as Kafka does.
* other types: INVALID_REQUEST.

Configs are stored by the controller, which tells the brokers concerned
before answering; a broker that cannot reach it answers NOT_CONTROLLER.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter

from twisted_kafka.config import BROKER_CONFIG, TOPIC_CONFIG, Type, format_value
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler
from ..authorization import Authorization

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _list_items(text: str | None) -> list[str]:
    return [item for item in (text or "").split(",") if item]


def apply_operations(current: dict[str, str], operations, definitions) -> dict[str, str]:
    """The configs of a resource after IncrementalAlterConfigs ``operations``
    ((name, op, value) triples) on ``current``; ``definitions`` maps names to ConfigKeys."""
    names = [name for name, _, _ in operations]
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(duplicates)}")
    result = dict(current)
    for name, op, value in operations:
        if op == SET:
            if value is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : SET:{name}")
            result[name] = value
        elif op == DELETE:
            result.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            key = definitions.get(name)
            verb = "append" if op == APPEND else "subtract"
            if key is None or key.type is not Type.LIST:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Config value {verb} is not allowed for config key: {name}")
            if name in result:
                items = _list_items(result[name])
            else:
                items = _list_items(format_value(key.default, key.type) if key.default is not None else None)
            changes = _list_items(value)
            if op == APPEND:
                items += [item for item in changes if item not in items]
            else:
                items = [item for item in items if item not in changes]
            result[name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {name}")
    return result


class _ConfigsHandler(ApiHandler, ABC):
    """What AlterConfigs and IncrementalAlterConfigs share: resources, errors, applying."""

    incremental = False

    def __init__(self, admin_manager: AdminManager, *, authorization: Authorization):
        self.authorization = authorization
        self.admin = admin_manager

    def _response_class(self):
        return m.IncrementalAlterConfigsResponse if self.incremental else m.AlterConfigsResponse

    def _entry(self, resource, error: ErrorCode, message: str | None):
        R = self._response_class()
        return R.AlterConfigsResourceResponse(error_code=error, error_message=message,
                                              resource_type=resource.resource_type,
                                              resource_name=resource.resource_name)

    @abstractmethod
    def _new_configs(self, current: dict[str, str], resource, definitions) -> dict[str, str]:
        """The overrides ``resource`` leaves after this request (AlterConfigs replaces, Incremental edits)."""

    async def handle(self, request):
        body = request.body
        counts = Counter((r.resource_type, r.resource_name) for r in body.resources)
        responses = []
        request.mark_local_complete()
        for resource in body.resources:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                responses.append(self._entry(resource, ErrorCode.INVALID_REQUEST,
                                             "Each resource must appear at most once."))
                continue
            try:
                self._check_type(resource)
                self._authorize(request, resource)
                await self._alter(resource, body.validate_only)
            except KafkaError as exc:
                responses.append(self._entry(resource, exc.code, exc.message))
            else:
                responses.append(self._entry(resource, ErrorCode.NONE, None))
        R = self._response_class()
        return R(throttle_time_ms=0, responses=responses)

    def _check_type(self, resource) -> None:
        """Kafka refuses the legacy AlterConfigs on broker loggers before anything else."""
        if resource.resource_type == BROKER_LOGGER and not self.incremental:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "AlterConfigs is deprecated and does not support the "
                                                        "resource type BROKER_LOGGER: use IncrementalAlterConfigs")

    def _authorize(self, request, resource) -> None:
        """Kafka: ALTER_CONFIGS on the topic, or on the cluster for broker configs and loggers."""
        if resource.resource_type == TOPIC:
            self.authorization.require(request.context, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC,
                                       resource.resource_name)
        elif resource.resource_type in (BROKER, BROKER_LOGGER):
            self.authorization.require(request.context, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)

    async def _alter(self, resource, validate_only: bool) -> None:
        kind, name = resource.resource_type, resource.resource_name
        if kind == TOPIC:
            await self.admin.alter_topic_configs(
                name, lambda current: self._new_configs(current, resource, TOPIC_CONFIG), validate_only=validate_only)
        elif kind == BROKER:
            await self.admin.alter_broker_configs(
                name, lambda current: self._new_configs(current, resource, BROKER_CONFIG), validate_only=validate_only)
        elif kind == BROKER_LOGGER and self.incremental:
            self.admin.alter_broker_loggers(name, [(c.name, c.config_operation, c.value) for c in resource.configs],
                                            validate_only=validate_only)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {kind}")

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        R = self._response_class()
        return R(throttle_time_ms=0, responses=[self._entry(resource, error, message)
                                                for resource in request.body.resources])


class AlterConfigsHandler(_ConfigsHandler):
    api_key = ApiKey.ALTER_CONFIGS

    def _new_configs(self, current, resource, definitions):
        configs = {}
        for entry in resource.configs:
            configs[entry.name] = entry.value
        nulls = sorted(name for name, value in configs.items() if value is None)
        if nulls:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
        return configs


class IncrementalAlterConfigsHandler(_ConfigsHandler):
    api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    incremental = True

    def _new_configs(self, current, resource, definitions):
        return apply_operations(current, [(c.name, c.config_operation, c.value) for c in resource.configs],
                                definitions)
