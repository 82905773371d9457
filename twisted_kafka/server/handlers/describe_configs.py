"""DescribeConfigs (32): the configuration of topics and of this broker, with sources.

Resources, as Kafka answers them:

* TOPIC (2): every topic key with its effective value -- the topic's own
  override (DYNAMIC_TOPIC_CONFIG) or the broker setting it inherits, with
  that setting's source -- never read-only.  An unknown topic is answered
  UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION.
* BROKER (4) named with this broker's id: every broker key (and the
  per-listener keys that are set), with the layer its value came from.
  ``read_only`` is true unless this broker applies the key at runtime (a
  ``DynamicBrokerConfig`` reconfigurable declares it), so what
  DescribeConfigs calls writable is exactly what AlterConfigs accepts.  Passwords, and keys the
  broker does not know, are sensitive: value null.
* BROKER named "" (the cluster default): the dynamic cluster-default configs only.
* BROKER with another id, or a name that is no integer: INVALID_REQUEST.
* BROKER_LOGGER (8) of this broker (KIP-412): every logger with the level
  in force -- the root, Kafka's logger names, the broker's namespaces
  (``twisted_kafka/logging/levels.py``) -- each, as Kafka answers, with
  source DYNAMIC_BROKER_LOGGER_CONFIG, not read-only and without synonyms;
  without a broker id, or with another one: INVALID_REQUEST.
* anything else: INVALID_REQUEST.

``configuration_keys`` null or empty means every key.  Synonyms (v1+, when
asked), the config type (v3+) and documentation (v3+, when asked) follow
Kafka's ``ConfigHelper``.  v0 reports ``is_default`` instead of a source.
"""

from __future__ import annotations

from twisted_kafka.config import ConfigEntry, ConfigSource, Type
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..admin_manager import AdminManager, DescribedConfig
from ..api_handler import ApiHandler
from ..authorization import Authorization

R = m.DescribeConfigsResponse
_Result = R.DescribeConfigsResult
_Entry = R.DescribeConfigsResult.DescribeConfigsResourceResult
_Synonym = R.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8

#: DescribeConfigsResponse.ConfigType ids.
CONFIG_TYPE_IDS = {
    Type.BOOLEAN: 1, Type.STRING: 2, Type.INT: 3, Type.SHORT: 4, Type.LONG: 5,
    Type.DOUBLE: 6, Type.LIST: 7, Type.CLASS: 8, Type.PASSWORD: 9,
}


class DescribeConfigsHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_CONFIGS

    def __init__(self, admin_manager: AdminManager, *, authorization: Authorization):
        self.authorization = authorization
        self.admin = admin_manager

    async def handle(self, request):
        results = []
        for resource in request.body.resources:
            try:
                self._authorize(request, resource)
                entries = self._describe(resource)
            except KafkaError as exc:
                results.append(self._result(resource, exc.code, exc.message, []))
                continue
            keys = resource.configuration_keys
            if keys:
                wanted = set(keys)
                entries = [e for e in entries if e[0] in wanted]
            results.append(self._result(resource, ErrorCode.NONE, None,
                                        [self._entry(request, *e) for e in entries]))
        return R(throttle_time_ms=0, results=results)

    # -- what each resource holds ---------------------------------------------------

    def _authorize(self, request, resource) -> None:
        """Kafka: DESCRIBE_CONFIGS on the topic, or on the cluster for broker configs."""
        if resource.resource_type == TOPIC:
            self.authorization.require(request.context, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                       resource.resource_name)
        elif resource.resource_type in (BROKER, BROKER_LOGGER):
            self.authorization.require(request.context, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)

    def _describe(self, resource) -> list[DescribedConfig]:
        kind, name = resource.resource_type, resource.resource_name
        if kind == TOPIC:
            return self.admin.describe_topic_configs(name)
        if kind == BROKER:
            return self.admin.describe_broker_configs(name)
        if kind == BROKER_LOGGER:
            return self.admin.describe_broker_loggers(name)
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")

    # -- encoding -----------------------------------------------------------------

    @staticmethod
    def _entry(request, name: str, entry: ConfigEntry, read_only: bool, value: str | None):
        body = request.body
        version = request.api_version
        synonyms = []
        if version >= 1 and body.include_synonyms:
            synonyms = [_Synonym(name=s.name, value=s.value_string, source=s.source.value) for s in entry.synonyms]
        documentation = None
        if version >= 3 and body.include_documentation:
            documentation = entry.doc or None
        return _Entry(name=name, value=None if entry.sensitive else value, read_only=read_only,
                      config_source=entry.source.value,
                      is_default=entry.source is ConfigSource.DEFAULT_CONFIG,
                      is_sensitive=entry.sensitive, synonyms=synonyms,
                      config_type=CONFIG_TYPE_IDS.get(entry.type, 0) if entry.type is not None else 0,
                      documentation=documentation)

    @staticmethod
    def _result(resource, error: ErrorCode, message: str | None, configs: list):
        return _Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                       resource_name=resource.resource_name, configs=configs)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, results=[self._result(resource, error, message, [])
                                              for resource in request.body.resources])
