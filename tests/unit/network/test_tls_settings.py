"""A TLS listener's settings from Kafka's ssl.* keys: files, per-listener overrides, and the errors naming a key."""

from __future__ import annotations

import pytest
import trustme
from OpenSSL import SSL

from twisted_kafka.config import ConfigError, KafkaConfig
from twisted_kafka.network.tls import ServerTls, load_settings, openssl_cipher_name

BASE = {"listeners": "SSL://127.0.0.1:0,CLIENT://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,CLIENT:SSL", "inter.broker.listener.name": "SSL",
        "log.dirs": "/nonexistent"}


@pytest.fixture
def ca():
    return trustme.CA()


@pytest.fixture
def keystore(tmp_path, ca):
    cert = ca.issue_cert("localhost", "127.0.0.1", common_name="broker", organization_unit_name="brokers")
    path = tmp_path / "server.pem"
    path.write_bytes(cert.private_key_pem.bytes() + b"".join(c.bytes() for c in cert.cert_chain_pems))
    return str(path)


def config(**props) -> KafkaConfig:
    return KafkaConfig.from_props({**BASE, **{k.replace("__", ".").replace("_", "."): v for k, v in props.items()}})


def pem(keystore: str, **more) -> KafkaConfig:
    return KafkaConfig.from_props({**BASE, "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore, **more})


def test_pem_key_store_file(keystore):
    settings = load_settings(pem(keystore), "SSL")
    assert settings.certificate is not None and "CN=broker" in settings.certificate.subject.rfc4514_string()
    assert settings.protocols == ("TLSv1.2", "TLSv1.3") and settings.client_auth == "none"
    assert settings.sources == (keystore,)


def test_listener_prefix_overrides_the_broker_wide_key(keystore):
    settings = load_settings(pem(keystore, **{"listener.name.client.ssl.client.auth": "required"}), "CLIENT")
    assert settings.client_auth == "required"
    assert load_settings(pem(keystore), "CLIENT").client_auth == "none"


def test_inline_pem_keys(ca):
    cert = ca.issue_cert("localhost")
    props = {**BASE, "ssl.keystore.type": "PEM", "ssl.keystore.key": cert.private_key_pem.bytes().decode(),
             "ssl.keystore.certificate.chain": b"".join(c.bytes() for c in cert.cert_chain_pems).decode(),
             "ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca.cert_pem.bytes().decode()}
    settings = load_settings(KafkaConfig.from_props(props), "SSL")
    assert settings.key is not None and len(settings.trusted) == 1


def test_no_key_store_names_the_key():
    with pytest.raises(ConfigError) as info:
        load_settings(KafkaConfig.from_props(BASE), "SSL")
    assert info.value.key == "ssl.keystore.location"


def test_jks_is_refused_naming_the_prefixed_key(keystore):
    props = {**BASE, "listener.name.ssl.ssl.keystore.location": keystore}
    with pytest.raises(ConfigError) as info:
        load_settings(KafkaConfig.from_props(props), "SSL")
    assert info.value.key == "ssl.keystore.type" and "PKCS12" in str(info.value)


def test_unreadable_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read") as info:
        load_settings(pem(str(tmp_path / "missing.pem")), "SSL")
    assert info.value.key == "ssl.keystore.location"


def test_encrypted_key_needs_the_password(tmp_path, ca):
    from cryptography.hazmat.primitives import serialization

    cert = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    path = tmp_path / "enc.pem"
    path.write_bytes(encrypted + b"".join(c.bytes() for c in cert.cert_chain_pems))
    with pytest.raises(ConfigError, match="ssl.key.password"):
        load_settings(pem(str(path)), "SSL")
    assert load_settings(pem(str(path), **{"ssl.key.password": "s3cret"}), "SSL").key is not None


def test_protocols_and_ciphers(keystore):
    with pytest.raises(ConfigError) as info:
        load_settings(pem(keystore, **{"ssl.enabled.protocols": "TLSv1.4"}), "SSL")
    assert info.value.key == "ssl.enabled.protocols"
    with pytest.raises(ConfigError) as info:
        load_settings(pem(keystore, **{"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}), "SSL")
    assert info.value.key == "ssl.cipher.suites"
    load_settings(pem(keystore, **{"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
                                                        "TLS_AES_128_GCM_SHA256"}), "SSL")


@pytest.mark.parametrize("iana, openssl", [
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"),
    ("TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", "DHE-RSA-AES256-SHA256"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
])
def test_iana_cipher_names(iana, openssl):
    assert openssl_cipher_name(iana) == openssl
    SSL.Context(SSL.TLS_METHOD).set_cipher_list(openssl.encode())


def test_invalid_mapping_rules_name_the_key(keystore):
    with pytest.raises(ConfigError) as info:
        load_settings(pem(keystore, **{"ssl.principal.mapping.rules": "nonsense"}), "SSL")
    assert info.value.key == "ssl.principal.mapping.rules"


def test_reload_keeps_the_subject_unless_allowed(tmp_path, ca, keystore):
    tls = ServerTls(pem(keystore), "SSL", "SSL")
    assert tls.reload(pem(keystore)) is False            # nothing changed
    same = ca.issue_cert("localhost", "127.0.0.1", common_name="broker", organization_unit_name="brokers")
    with open(keystore, "wb") as f:
        f.write(same.private_key_pem.bytes() + b"".join(c.bytes() for c in same.cert_chain_pems))
    assert tls.reload(pem(keystore)) is True and tls.reloads == 1
    other = ca.issue_cert("localhost", "127.0.0.1", common_name="someone-else", organization_unit_name="brokers")
    with open(keystore, "wb") as f:
        f.write(other.private_key_pem.bytes() + b"".join(c.bytes() for c in other.cert_chain_pems))
    with pytest.raises(ConfigError, match="ssl.allow.dn.changes"):
        tls.reload(pem(keystore))
    assert tls.reload(pem(keystore, **{"ssl.allow.dn.changes": "true"})) is True


def test_sasl_ssl_takes_client_auth_only_with_the_listener_prefix(keystore):
    """KIP-684: the broker-wide ssl.client.auth does not apply to SASL_SSL listeners."""
    broker_wide = pem(keystore, **{"ssl.client.auth": "required"})
    assert load_settings(broker_wide, "SSL", security_protocol="SASL_SSL").client_auth == "none"
    assert load_settings(broker_wide, "SSL").client_auth == "required"
    prefixed = pem(keystore, **{"listener.name.ssl.ssl.client.auth": "required"})
    assert load_settings(prefixed, "SSL", security_protocol="SASL_SSL").client_auth == "required"


ADMIN = {"prefix": "admin.rest.", "defaults": {"ssl.client.auth": "none"}}


def test_prefixed_keys_read_the_admin_endpoint_stores_and_broker_wide_policy(keystore, tmp_path, ca):
    props = {**BASE, "admin.rest.ssl.keystore.location": keystore, "ssl.keystore.location": "/broker/only.p12",
             "ssl.enabled.protocols": "TLSv1.3", "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}
    settings = load_settings(KafkaConfig.from_props(props), "admin.rest", **ADMIN)
    assert settings.sources == (keystore,), "the broker's own key store is never borrowed"
    assert settings.protocols == ("TLSv1.3",) and settings.cipher_suites == ("TLS_AES_256_GCM_SHA384",)
    assert settings.client_auth == "none" and settings.trusted == ()
    trusting = KafkaConfig.from_props({**props, "admin.rest.ssl.truststore.location": ca_file(tmp_path, ca)})
    required = load_settings(trusting, "admin.rest", prefix="admin.rest.", defaults={"ssl.client.auth": "required"})
    assert required.client_auth == "required" and len(required.trusted) == 1


def ca_file(tmp_path, ca) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def test_prefixed_key_errors_name_the_prefixed_key(tmp_path, ca, keystore):
    with pytest.raises(ConfigError, match=r"configuration admin\.rest\.ssl\.keystore\.location"):
        load_settings(KafkaConfig.from_props(BASE), "admin.rest", **ADMIN)
    with pytest.raises(ConfigError, match=r"configuration admin\.rest\.ssl\.keystore\.location.*cannot read"):
        load_settings(KafkaConfig.from_props({**BASE, "admin.rest.ssl.keystore.location": str(tmp_path / "no")}),
                      "admin.rest", **ADMIN)
    with pytest.raises(ConfigError, match=r"configuration admin\.rest\.ssl\.truststore\.location"):
        load_settings(KafkaConfig.from_props({**BASE, "admin.rest.ssl.keystore.location": keystore,
                                              "admin.rest.ssl.truststore.location": str(tmp_path / "no")}),
                      "admin.rest", **ADMIN)
    with pytest.raises(ConfigError, match=r"configuration admin\.rest\.ssl\.keystore\.type"):
        load_settings(KafkaConfig.from_props({**BASE, "admin.rest.ssl.keystore.location": keystore,
                                              "admin.rest.ssl.keystore.type": "JKS"}), "admin.rest", **ADMIN)


def test_prefixed_encrypted_key_and_pkcs12(tmp_path, ca):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    cert = ca.issue_cert("localhost", common_name="admin")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    chain = b"".join(c.bytes() for c in cert.cert_chain_pems)
    encrypted = tmp_path / "admin.pem"
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"secret")) + chain)
    props = {**BASE, "admin.rest.ssl.keystore.location": str(encrypted)}
    with pytest.raises(ConfigError, match=r"set admin\.rest\.ssl\.key\.password"):
        load_settings(KafkaConfig.from_props(props), "admin.rest", **ADMIN)
    settings = load_settings(KafkaConfig.from_props({**props, "admin.rest.ssl.key.password": "secret"}),
                             "admin.rest", **ADMIN)
    assert settings.certificate is not None
    store = tmp_path / "admin.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(
        b"admin", key, settings.certificate, None, serialization.BestAvailableEncryption(b"storepass")))
    p12 = load_settings(KafkaConfig.from_props({**BASE, "admin.rest.ssl.keystore.type": "PKCS12",
                                                "admin.rest.ssl.keystore.location": str(store),
                                                "admin.rest.ssl.keystore.password": "storepass"}),
                        "admin.rest", **ADMIN)
    assert p12.certificate is not None and p12.certificate.serial_number == settings.certificate.serial_number
    server = ServerTls(KafkaConfig.from_props({**props, "admin.rest.ssl.key.password": "secret"}), "admin.rest",
                       "SSL", **ADMIN)
    assert server.reload(KafkaConfig.from_props({**props, "admin.rest.ssl.key.password": "secret"})) is False
