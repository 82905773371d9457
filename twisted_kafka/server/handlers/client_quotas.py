"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546, for the ``ip`` entity (KIP-612).

The quota this broker enforces per client address is Kafka's
``connection_creation_rate`` of the ``ip`` entity: a named address, or the
default entity (a null name) for every address without its own.  Kafka keeps
these under ``/config/ips``; here they are the cluster-wide dynamic broker
config ``quota.ip.connection.creation.rate`` (``address:rate`` pairs,
``<default>`` for the default), changed through
``AdminManager.alter_ip_connection_rates`` -- the AlterConfigs path -- so they are stored by the controller, reach every
broker, survive restarts, and are what the admin REST endpoint's
``/v1/quotas`` shows and changes.

The ``user`` and ``client-id`` entities (request and bandwidth quotas) are
not enforced by this broker: describing them finds nothing, and altering
them is refused with INVALID_REQUEST rather than stored without effect.
Filters follow Kafka's rules: match type 0 (exact name), 1 (the default
entity) or 2 (any named entity); an entity type appears at most once; an
``ip`` component cannot be combined with ``user`` or ``client-id``.
"""

from __future__ import annotations

import ipaddress
import math

from twisted_kafka.network.connection_quotas import DEFAULT_IP
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler

IP = "ip"
USER, CLIENT_ID = "user", "client-id"
RATE_KEY = "connection_creation_rate"
EXACT, DEFAULT, ANY = 0, 1, 2

Describe = m.DescribeClientQuotasResponse
Alter = m.AlterClientQuotasResponse


def ip_entity_name(name: str | None) -> str:
    """The stored address of an ``ip`` entity name (None: the default entity); INVALID_REQUEST if not an IP."""
    if name is None:
        return DEFAULT_IP
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{name} is not a valid IP") from None


class DescribeClientQuotasHandler(ApiHandler):
    """DescribeClientQuotas: the ip entities matching the filter, with their connection_creation_rate."""

    api_key = ApiKey.DESCRIBE_CLIENT_QUOTAS
    cluster_operation = AclOperation.DESCRIBE_CONFIGS        # Kafka's KafkaApis

    def __init__(self, admin_manager: AdminManager):
        self.admin_manager = admin_manager

    async def handle(self, request):
        components = request.body.components or []
        seen: set[str] = set()
        ip_filter = None
        for component in components:
            if component.entity_type in seen:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Duplicate filter component entity type {component.entity_type}")
            seen.add(component.entity_type)
            if component.match_type not in (EXACT, DEFAULT, ANY):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected match type {component.match_type}")
            if component.match_type == EXACT and component.match is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Filter component with an exact match needs a name")
            if component.entity_type == IP:
                ip_filter = component
        if IP in seen and seen & {USER, CLIENT_ID}:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                                                        "component should not be used with user or clientId "
                                                        "filter component.")
        entries = []
        if not (seen - {IP}):   # only ip entities exist here: a filter on user or client-id matches none
            for address, rate in sorted(self.admin_manager.ip_connection_rates().items()):
                if ip_filter is not None and not _matches(ip_filter, address):
                    continue
                name = None if address == DEFAULT_IP else address
                entries.append(Describe.EntryData(
                    entity=[Describe.EntryData.EntityData(entity_type=IP, entity_name=name)],
                    values=[Describe.EntryData.ValueData(key=RATE_KEY, value=float(rate))]))
        return Describe(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return Describe(throttle_time_ms=0, error_code=error, error_message=message, entries=[])


def _matches(component, address: str) -> bool:
    if component.match_type == DEFAULT:
        return address == DEFAULT_IP
    if component.match_type == ANY:
        return address != DEFAULT_IP
    try:
        return address == str(ipaddress.ip_address(component.match))
    except ValueError:
        return False


class AlterClientQuotasHandler(ApiHandler):
    """AlterClientQuotas: set or remove connection_creation_rate of ip entities; per-entry errors."""

    api_key = ApiKey.ALTER_CLIENT_QUOTAS
    cluster_operation = AclOperation.ALTER_CONFIGS        # Kafka's KafkaApis

    def __init__(self, admin_manager: AdminManager):
        self.admin_manager = admin_manager

    async def handle(self, request):
        body = request.body
        results: list[tuple[list, ErrorCode, str | None]] = []
        updates: dict[str, float | None] = {}
        applied: list[int] = []
        for entry in body.entries or []:
            entity = [(e.entity_type, e.entity_name) for e in entry.entity or []]
            try:
                address = self._address(entity)
                values = [self._value(op) for op in entry.ops or []]
            except KafkaError as exc:
                results.append((entity, exc.code, exc.message))
                continue
            if values:
                updates[address] = values[-1]
            applied.append(len(results))
            results.append((entity, ErrorCode.NONE, None))
        if updates:
            try:
                await self.admin_manager.alter_ip_connection_rates(updates, validate_only=bool(body.validate_only))
            except KafkaError as exc:
                for index in applied:
                    results[index] = (results[index][0], exc.code, exc.message)
        return Alter(throttle_time_ms=0, entries=[
            Alter.EntryData(error_code=code, error_message=message,
                            entity=[Alter.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity])
            for entity, code, message in results])

    @staticmethod
    def _address(entity: list[tuple[str, str | None]]) -> str:
        types = [entity_type for entity_type, _ in entity]
        if len(set(types)) != len(types):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate entity type in the entity")
        if types != [IP]:
            if IP in types:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Invalid quota entity combination, IP entity should not be combined with user or "
                                 "clientId entity.")
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Quotas of {', '.join(types) or 'an empty entity'} are not supported by this broker: "
                             "only the ip entity's connection_creation_rate is enforced")
        return ip_entity_name(entity[0][1])

    @staticmethod
    def _value(op) -> float | None:
        if op.key != RATE_KEY:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op.key}")
        if op.remove:
            return None
        value = op.value
        if not math.isfinite(value) or value < 0 or value != int(value) or value > 2147483647:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Invalid quota value {value} for {RATE_KEY}: a whole number of connections per second")
        return float(value)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return Alter(throttle_time_ms=0, entries=[
            Alter.EntryData(error_code=error, error_message=message,
                            entity=[Alter.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                                    for e in entry.entity or []])
            for entry in request.body.entries or []])
