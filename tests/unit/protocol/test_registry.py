"""The API registry: advertised ranges against the constraints of librdkafka (and kcat),
kafka-python and aiokafka, listed in the registry's module docstring."""

from __future__ import annotations

import pytest
from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

from twisted_kafka.protocol.registry import ADVERTISED_RANGES, CONTROLLER_API_KEYS, REGISTRY, ApiKey

from .clients import AIOKAFKA_REQUESTS

CLIENT_KEYS = [spec.api_key for spec in REGISTRY if spec.api_key not in CONTROLLER_API_KEYS]


def test_api_key_names_match_kafka():
    assert ApiKey.PRODUCE == 0 and ApiKey.DESCRIBE_CLUSTER == 60
    assert (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA,
            ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN) == (4, 5, 6, 7)
    assert (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE) == (17, 36)
    assert (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS) == (29, 30, 31)
    assert (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS) == (33, 44)
    assert (ApiKey.DELETE_RECORDS, ApiKey.OFFSET_FOR_LEADER_EPOCH) == (21, 23)
    assert (ApiKey.DESCRIBE_PRODUCERS, ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS) == (61, 65, 66)
    assert [k.value for k in ApiKey] == list(range(67)) + [68, 69]
    assert (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE) == (68, 69)


def test_advertised_ranges():
    """The ranges chosen from what each client sends; changing one is a compatibility decision."""
    expected = {
        0: (0, 10), 1: (4, 12), 2: (0, 7), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 7), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (0, 7), 20: (0, 6), 22: (0, 4),
        23: (2, 4), 32: (0, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2), 21: (0, 2), 60: (0, 2),
        # Transactions (KIP-98, KIP-664): v0 for aiokafka's structs; WriteTxnMarkers between brokers only.
        24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (1, 1), 28: (0, 3), 61: (0, 0), 65: (0, 0), 66: (0, 1),
        # KIP-848: librdkafka 2.16 sends ConsumerGroupHeartbeat v1 only.
        68: (0, 1), 69: (0, 0),
        # Controller APIs: from the first version carrying a broker epoch (KIP-380).
        4: (2, 7), 5: (1, 4), 6: (5, 8), 7: (2, 3),
    }
    for key, bounds in expected.items():
        assert (REGISTRY[key].min_version, REGISTRY[key].max_version) == bounds, ApiKey(key).name


def test_versions_old_librdkafka_checks_for_are_in_range():
    """librdkafka before 2.11.1 (kcat) enables features, compression among them, only when
    these exact versions are advertised (src/rdkafka_feature.c)."""
    for key, version in ((0, 0), (0, 3), (0, 7), (1, 4), (1, 10), (22, 0), (17, 1), (36, 0), (10, 0), (2, 1)):
        assert REGISTRY[key].is_advertised(version), (ApiKey(key).name, version)


def test_aiokafka_finds_a_struct_in_every_range():
    """aiokafka picks its highest struct inside [min, max] and raises when there is none."""
    aiokafka_keys = {key for key, _ in AIOKAFKA_REQUESTS}
    for spec in REGISTRY:
        if spec.api_key not in aiokafka_keys:
            continue
        versions = [v for (k, v) in AIOKAFKA_REQUESTS if k == spec.api_key]
        assert any(spec.is_advertised(v) for v in versions), spec.name
    # Spelled out: aiokafka 0.14.0's highest struct of each API it sends.
    for key, version in ((22, 0), (18, 0), (12, 1), (13, 1), (10, 1), (19, 3), (20, 3), (8, 3), (9, 3), (1, 11),
                         (3, 5), (2, 3), (0, 7), (14, 3), (11, 5)):
        assert REGISTRY[key].is_advertised(version), (ApiKey(key).name, version)


@pytest.mark.parametrize("keys", [REGISTRY.keys(), CLIENT_KEYS], ids=["all", "client-apis"])
def test_kafka_python_infers_at_least_3_0(keys):
    """kafka-python infers a broker version from the table and uses magic v2 batches,
    idempotence and zstd only when that version is new enough."""
    table = {key: (low, high) for key, low, high in REGISTRY.api_versions_entries(keys)}
    assert infer_broker_version_from_api_versions(table) >= (3, 0)


def test_layout_thresholds_inside_ranges_are_schema_versions():
    # Every advertised max has a message layout in the schema, request and response.
    for spec in REGISTRY:
        assert spec.max_version <= spec.request_class.max_version
        assert spec.max_version <= spec.response_class.max_version


def test_do_not_advertise_apis_clients_change_behaviour_for():
    for key in (71, 72, 76, 77, 78, 79):
        assert key not in REGISTRY


def test_flexible_thresholds_and_header_versions():
    assert REGISTRY[ApiKey.PRODUCE].first_flexible == 9
    assert REGISTRY[ApiKey.FETCH].first_flexible == 12
    assert REGISTRY[ApiKey.METADATA].first_flexible == 9
    assert REGISTRY[ApiKey.API_VERSIONS].first_flexible == 3
    assert REGISTRY[ApiKey.SASL_HANDSHAKE].first_flexible is None
    assert REGISTRY[ApiKey.DESCRIBE_CLUSTER].first_flexible == 0
    assert REGISTRY[ApiKey.LEADER_AND_ISR].first_flexible == 4
    api_versions = REGISTRY[ApiKey.API_VERSIONS]
    assert [api_versions.request_header_version(v) for v in (0, 2, 3, 4, 99)] == [1, 1, 2, 2, 2]
    assert [api_versions.response_header_version(v) for v in (0, 3, 4, 99)] == [0, 0, 0, 0]
    produce = REGISTRY[ApiKey.PRODUCE]
    assert [produce.response_header_version(v) for v in (8, 9, 10)] == [0, 1, 1]
    shutdown = REGISTRY[ApiKey.CONTROLLED_SHUTDOWN]
    assert [shutdown.request_header_version(v) for v in range(4)] == [0, 1, 1, 2]


def test_api_versions_entries_only_for_served_keys():
    entries = REGISTRY.api_versions_entries([18, 3, 0, 3])
    assert entries == [(0, 0, 10), (3, 0, 13), (18, 0, 4)]
    with pytest.raises(KeyError):
        REGISTRY.api_versions_entries([18, 71])


def test_registry_covers_every_advertised_range():
    assert set(REGISTRY.keys()) == set(ADVERTISED_RANGES)
    assert len(REGISTRY) == len(ADVERTISED_RANGES)
    assert REGISTRY.get(9999) is None and 9999 not in REGISTRY
