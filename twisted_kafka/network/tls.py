"""TLS for SSL and SASL_SSL listeners and for the broker's own connections: pyOpenSSL contexts from Kafka's keys.

Each TLS listener reads Kafka's ``ssl.*`` keys, each one overridable with
``listener.name.<listener>.`` (Kafka's ``valuesWithPrefixOverride``), so the
data plane and the control plane can have their own certificates and client
authentication:

* key store: ``ssl.keystore.type`` PEM (``ssl.keystore.location``: one file
  with the private key and the certificate chain, or the inline
  ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``; an encrypted
  key is opened with ``ssl.key.password``) or PKCS12 (with
  ``ssl.keystore.password``).  JKS, Kafka's default type, is a Java format:
  a listener set to it is refused at startup, naming the key;
* trust store: ``ssl.truststore.type`` PEM (``ssl.truststore.location`` or
  the inline ``ssl.truststore.certificates``) or PKCS12 -- the CAs client
  certificates (and, for the broker's own connections, servers) are checked
  against;
* ``ssl.client.auth``: ``required`` (a client without a certificate the
  trust store vouches for is refused in the handshake), ``requested`` (a
  certificate is asked for; one that is offered must verify), ``none``;
* ``ssl.enabled.protocols`` (TLSv1.2 and TLSv1.3 by default) and
  ``ssl.cipher.suites`` in Kafka's (IANA) names, e.g.
  ``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`` or ``TLS_AES_128_GCM_SHA256``;
  OpenSSL's own names are accepted too.  Empty: OpenSSL's defaults.

A ``ServerTls`` is the listener's ``IOpenSSLServerConnectionCreator``: every
accepted connection gets an ``SSL.Connection`` over its *current* context, so
``reload`` -- SIGHUP, ``KafkaServer.reload_certificates``, an AlterConfigs
of the listener's ``ssl.keystore.location`` -- swaps the context for new
connections while existing ones keep the one they shook hands with.  As
Kafka does for a dynamically updated key store, a new certificate must keep
the subject (``ssl.allow.dn.changes``) and the subject alternative names
(``ssl.allow.san.changes``) of the one it replaces.

The same loader serves a TLS port that is not a Kafka listener, the https
admin endpoint: its keys carry a prefix (``admin.rest.ssl.*``) instead of
``listener.name.<l>.``; its key and trust stores are its own (never the
broker's ``ssl.*`` stores), while protocols and cipher suites fall back to the
broker-wide ``ssl.enabled.protocols`` and ``ssl.cipher.suites`` (see ``_Keys``).

A failed handshake -- a plaintext client on a TLS port, no or an untrusted
client certificate, no common protocol or cipher -- is described by
``describe_failure`` for the log line and the connection events; Kafka
counts it as an authentication failure (``SslAuthenticationException``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from OpenSSL import SSL, crypto
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IOpenSSLServerConnectionCreator
from twisted.logger import Logger
from zope.interface import implementer

from twisted_kafka.config import ConfigError
from twisted_kafka.config.prefixes import listener_key_name

from .ssl_principal import InvalidRule, NoMatchingRule, PrincipalMapper

__all__ = ["TlsSettings", "ServerTls", "ClientTls", "load_settings", "describe_failure", "openssl_cipher_name",
           "PEM", "PKCS12", "RECONFIGURABLE_KEYS", "first_bytes_hint"]

log = Logger(namespace="twisted_kafka.network.tls")

PEM, PKCS12, JKS = "PEM", "PKCS12", "JKS"

#: The keys an AlterConfigs may change per listener (Kafka's SslConfigs.RECONFIGURABLE_CONFIGS).
RECONFIGURABLE_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
})

_PROTOCOLS = {
    "TLSv1": SSL.TLS1_VERSION,
    "TLSv1.1": SSL.TLS1_1_VERSION,
    "TLSv1.2": SSL.TLS1_2_VERSION,
    "TLSv1.3": SSL.TLS1_3_VERSION,
}
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})
_KEY_EXCHANGE = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": "",
                 "DHE_DSS": "DHE-DSS-", "ECDH_RSA": "ECDH-RSA-", "ECDH_ECDSA": "ECDH-ECDSA-"}
_BULK = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "AES_128_CBC": "AES128", "AES_256_CBC": "AES256",
         "AES_128_CCM": "AES128-CCM", "AES_256_CCM": "AES256-CCM", "CHACHA20_POLY1305": "CHACHA20-POLY1305",
         "3DES_EDE_CBC": "DES-CBC3", "CAMELLIA_128_CBC": "CAMELLIA128", "CAMELLIA_256_CBC": "CAMELLIA256",
         "ARIA_128_GCM": "ARIA128-GCM", "ARIA_256_GCM": "ARIA256-GCM"}
_IANA = re.compile(r"^(?:TLS|SSL)_(?P<kx>[A-Z0-9_]+?)_WITH_(?P<bulk>[A-Z0-9_]+?)(?:_(?P<mac>SHA|SHA256|SHA384))?$")


def openssl_cipher_name(name: str) -> str:
    """OpenSSL's name of a TLS 1.2 cipher suite given by its IANA (Java) name; other names are returned as they are."""
    match = _IANA.match(name)
    if match is None or match["kx"] not in _KEY_EXCHANGE or match["bulk"] not in _BULK:
        return name
    openssl = _KEY_EXCHANGE[match["kx"]] + _BULK[match["bulk"]]
    mac = match["mac"]
    if match["bulk"] == "CHACHA20_POLY1305" or match["bulk"].endswith("CCM"):
        return openssl
    if match["bulk"] == "3DES_EDE_CBC" and not _KEY_EXCHANGE[match["kx"]]:
        return "DES-CBC3-SHA"
    return f"{openssl}-{mac}" if mac else openssl


# -- settings ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TlsSettings:
    """One listener's TLS material and policy, as read from its keys (files read, keys decrypted)."""

    listener: str
    key: Any | None                          # a cryptography private key (None: no key store)
    chain: tuple[x509.Certificate, ...]      # the certificate first, then its chain
    trusted: tuple[x509.Certificate, ...]
    client_auth: str
    protocols: tuple[str, ...]
    cipher_suites: tuple[str, ...]
    endpoint_identification: str
    mapper: PrincipalMapper
    fingerprint: bytes = field(default=b"")  # of everything read: a reload that changes nothing is a no-op
    sources: tuple[str, ...] = ()            # where the material came from, for the log

    @property
    def certificate(self) -> x509.Certificate | None:
        return self.chain[0] if self.chain else None

    def describe(self) -> str:
        cert = self.certificate
        if cert is None:
            return f"listener {self.listener}: no certificate"
        return (f"listener {self.listener}: certificate {cert.subject.rfc4514_string()} "
                f"(serial {cert.serial_number:x}, valid until {cert.not_valid_after_utc:%Y-%m-%d %H:%M}Z) "
                f"from {', '.join(self.sources) or 'inline PEM'}")


class _Keys:
    """Reads one listener's keys, naming the exact key (prefixed or not) in every error.

    With a ``prefix`` (the admin endpoint's ``admin.rest.``) the keys are not
    a listener's: ``ssl.<x>`` is read as ``<prefix>ssl.<x>`` when that key is
    declared; otherwise ``defaults`` gives it; otherwise a key or trust store
    key (``RECONFIGURABLE_KEYS``) is unset -- the broker's own stores are
    never borrowed -- and a policy key (``ssl.enabled.protocols``,
    ``ssl.cipher.suites``, ``ssl.allow.dn.changes``, ...) is the broker-wide
    ``ssl.*`` value, so one protocol and cipher policy covers every TLS port.
    """

    def __init__(self, config, listener: str, prefix: str | None = None, defaults: dict[str, Any] | None = None):
        self.config = config
        self.listener = listener
        self.prefix = prefix
        self.defaults = defaults or {}

    def _own(self, key: str) -> str | None:
        """The prefixed key reading ``key``, if declared."""
        if self.prefix is None:
            return None
        name = self.prefix + key
        return name if name in self.config else None

    def name(self, key: str) -> str:
        if self.prefix is not None:
            own = self._own(key)
            if own is not None or key in RECONFIGURABLE_KEYS or key in self.defaults:
                return self.prefix + key
            return key
        if self.config.listener_value(self.listener, key) is not None:
            return listener_key_name(self.listener, key)
        return key

    def __getitem__(self, key: str) -> Any:
        if self.prefix is not None:
            own = self._own(key)
            if own is not None:
                return self.config[own]
            if key in self.defaults:
                return self.defaults[key]
            return None if key in RECONFIGURABLE_KEYS else self.config[key]
        return self.config.listener_effective(self.listener, key)

    def secret(self, key: str) -> str | None:
        value = self[key]
        return None if value is None else getattr(value, "value", value)

    def read(self, key: str) -> bytes:
        path = self[key]
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except OSError as exc:
            raise ConfigError(self.name(key), f"cannot read {path}: {exc.strerror or exc}", path) from None


def _load_pem_key(data: bytes, password: str | None, key_name: str, password_key: str = "ssl.key.password"):
    secret = password.encode() if password is not None else None
    try:
        return serialization.load_pem_private_key(data, secret)
    except TypeError:
        if secret is None:
            raise ConfigError(key_name, f"the private key is encrypted: set {password_key}") from None
        return serialization.load_pem_private_key(data, None)   # not encrypted: the password is not needed
    except ValueError as exc:
        raise ConfigError(key_name, f"no usable PEM private key: {exc}") from None


def _load_pem_certificates(data: bytes, key_name: str) -> tuple[x509.Certificate, ...]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise ConfigError(key_name, f"no PEM certificate: {exc}") from None
    return tuple(certs)


def _key_store(keys: _Keys, sources: list[str], digest) -> tuple[Any, tuple[x509.Certificate, ...]]:
    store_type = (keys["ssl.keystore.type"] or JKS).upper()
    location = keys["ssl.keystore.location"]
    inline_key = keys.secret("ssl.keystore.key")
    inline_chain = keys.secret("ssl.keystore.certificate.chain")
    key_password = keys.secret("ssl.key.password")
    if inline_key is not None or inline_chain is not None:
        if store_type != PEM:
            raise ConfigError(keys.name("ssl.keystore.type"),
                              f"ssl.keystore.key and ssl.keystore.certificate.chain need type PEM, not {store_type}",
                              store_type)
        if location is not None:
            raise ConfigError(keys.name("ssl.keystore.location"),
                              "set either ssl.keystore.location or the inline ssl.keystore.key, not both")
        if inline_key is None or inline_chain is None:
            missing = "ssl.keystore.key" if inline_key is None else "ssl.keystore.certificate.chain"
            raise ConfigError(keys.name(missing), "the inline key and certificate chain go together")
        digest.update(inline_key.encode() + inline_chain.encode())
        key = _load_pem_key(inline_key.encode(), key_password, keys.name("ssl.keystore.key"),
                            keys.name("ssl.key.password"))
        return key, _load_pem_certificates(inline_chain.encode(), keys.name("ssl.keystore.certificate.chain"))
    if location is None:
        raise ConfigError(keys.name("ssl.keystore.location"),
                          f"listener {keys.listener} uses TLS and needs a certificate: set "
                          f"{keys.name('ssl.keystore.location')}"
                          + ("" if keys.prefix else " (or ssl.keystore.key with ssl.keystore.certificate.chain)"))
    data = keys.read("ssl.keystore.location")
    digest.update(data)
    sources.append(location)
    if store_type == PEM:
        key = _load_pem_key(data, key_password, keys.name("ssl.keystore.location"), keys.name("ssl.key.password"))
        return key, _load_pem_certificates(data, keys.name("ssl.keystore.location"))
    if store_type == PKCS12:
        password = keys.secret("ssl.keystore.password")
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(
                data, password.encode() if password is not None else None)
        except ValueError as exc:
            raise ConfigError(keys.name("ssl.keystore.location"), f"cannot open the PKCS12 key store: {exc}",
                              location) from None
        if key is None or cert is None:
            raise ConfigError(keys.name("ssl.keystore.location"), "the PKCS12 key store has no key and certificate",
                              location)
        return key, (cert, *extra)
    raise ConfigError(keys.name("ssl.keystore.type"),
                      f"{store_type} key stores are a Java format this broker cannot read: use PEM or PKCS12 "
                      "(keytool -importkeystore -deststoretype PKCS12 converts one)", store_type)


def _trust_store(keys: _Keys, sources: list[str], digest) -> tuple[x509.Certificate, ...]:
    store_type = (keys["ssl.truststore.type"] or JKS).upper()
    location = keys["ssl.truststore.location"]
    inline = keys.secret("ssl.truststore.certificates")
    if inline is not None:
        if store_type != PEM:
            raise ConfigError(keys.name("ssl.truststore.type"),
                              f"ssl.truststore.certificates needs type PEM, not {store_type}", store_type)
        if location is not None:
            raise ConfigError(keys.name("ssl.truststore.location"),
                              "set either ssl.truststore.location or ssl.truststore.certificates, not both")
        digest.update(inline.encode())
        return _load_pem_certificates(inline.encode(), keys.name("ssl.truststore.certificates"))
    if location is None:
        return ()
    data = keys.read("ssl.truststore.location")
    digest.update(data)
    sources.append(location)
    if store_type == PEM:
        return _load_pem_certificates(data, keys.name("ssl.truststore.location"))
    if store_type == PKCS12:
        password = keys.secret("ssl.truststore.password")
        try:
            _, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
        except ValueError as exc:
            raise ConfigError(keys.name("ssl.truststore.location"), f"cannot open the PKCS12 trust store: {exc}",
                              location) from None
        return tuple(c for c in (cert, *extra) if c is not None)
    raise ConfigError(keys.name("ssl.truststore.type"),
                      f"{store_type} trust stores are a Java format this broker cannot read: use PEM or PKCS12",
                      store_type)


def load_settings(config, listener: str, *, need_key: bool = True, security_protocol: str = "SSL",
                  prefix: str | None = None, defaults: dict[str, Any] | None = None) -> TlsSettings:
    """Read listener ``listener``'s TLS keys; ``ConfigError`` names the key at fault.

    ``need_key=False`` (a client connection) accepts no key store: the
    connection then offers no client certificate.  On a SASL_SSL listener
    ``ssl.client.auth`` applies only when set with the listener prefix
    (KIP-684): clients there authenticate with SASL.  ``prefix`` and
    ``defaults`` read the keys of a TLS port that is not a Kafka listener
    (the admin endpoint's ``admin.rest.ssl.*``; ``listener`` then only names
    it): see ``_Keys`` for which keys fall back to what.
    """
    keys = _Keys(config, listener, prefix, defaults)
    sources: list[str] = []
    digest = hashlib.sha256()
    if need_key or keys["ssl.keystore.location"] is not None or keys.secret("ssl.keystore.key") is not None:
        key, chain = _key_store(keys, sources, digest)
    else:
        key, chain = None, ()
    if key is not None and chain:
        public = chain[0].public_key().public_bytes(serialization.Encoding.DER,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)
        if key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo) != public:
            raise ConfigError(keys.name("ssl.keystore.location"), "the private key does not match the certificate")
    trusted = _trust_store(keys, sources, digest)
    protocols = tuple(keys["ssl.enabled.protocols"] or ())
    unknown = [p for p in protocols if p not in _PROTOCOLS]
    if unknown or not protocols:
        raise ConfigError(keys.name("ssl.enabled.protocols"),
                          f"expected some of {', '.join(_PROTOCOLS)}" + (f"; unknown {', '.join(unknown)}"
                                                                           if unknown else ""),
                          ",".join(protocols))
    suites = tuple(keys["ssl.cipher.suites"] or ())
    if security_protocol == "SASL_SSL":
        client_auth = (config.listener_value(listener, "ssl.client.auth") or "none").lower()
    else:
        client_auth = (keys["ssl.client.auth"] or "none").lower()
    try:
        mapper = PrincipalMapper(keys["ssl.principal.mapping.rules"])
    except InvalidRule as exc:
        raise ConfigError(keys.name("ssl.principal.mapping.rules"), str(exc)) from None
    identification = keys["ssl.endpoint.identification.algorithm"] or ""
    if identification.lower() not in ("", "https"):
        raise ConfigError(keys.name("ssl.endpoint.identification.algorithm"),
                          "expected https (check the host name against the certificate) or empty (do not)",
                          identification)
    settings = TlsSettings(listener=listener, key=key, chain=tuple(chain), trusted=trusted, client_auth=client_auth,
                           protocols=protocols, cipher_suites=suites, endpoint_identification=identification.lower(),
                           mapper=mapper, fingerprint=digest.digest(), sources=tuple(sources))
    build_context(settings, server=need_key, config_key=keys.name)   # refuses unusable protocols and ciphers now
    return settings


# -- contexts ----------------------------------------------------------------------------------


def _apply_ciphers(context: SSL.Context, settings: TlsSettings, config_key: Callable[[str], str]) -> None:
    versions = sorted(_PROTOCOLS[p] for p in settings.protocols)
    low, high = versions[0], versions[-1]
    if settings.cipher_suites:
        tls13 = [s for s in settings.cipher_suites if s in _TLS13_SUITES]
        tls12 = [openssl_cipher_name(s) for s in settings.cipher_suites if s not in _TLS13_SUITES]
        key = config_key("ssl.cipher.suites")
        for name in tls12:
            try:
                SSL.Context(SSL.TLS_METHOD).set_cipher_list(name.encode())
            except SSL.Error:
                raise ConfigError(key, f"unknown cipher suite {name}", ",".join(settings.cipher_suites)) from None
        if tls12:
            context.set_cipher_list(":".join(tls12).encode())
        elif low < SSL.TLS1_3_VERSION:
            low = SSL.TLS1_3_VERSION     # only TLS 1.3 suites listed: earlier versions would have no cipher
        if tls13:
            context.set_tls13_ciphersuites(":".join(tls13).encode())
        elif high >= SSL.TLS1_3_VERSION:
            high = SSL.TLS1_2_VERSION    # only TLS 1.2 suites listed: TLS 1.3 would have none
        if low > high:
            raise ConfigError(key, "no listed cipher suite belongs to an enabled protocol "
                                   f"({', '.join(settings.protocols)})", ",".join(settings.cipher_suites))
    context.set_min_proto_version(low)
    context.set_max_proto_version(high)


def build_context(settings: TlsSettings, *, server: bool, config_key: Callable[[str], str] = str) -> SSL.Context:
    """A pyOpenSSL context for ``settings``: a listener's (``server``) or the broker's own connections'."""
    context = SSL.Context(SSL.TLS_SERVER_METHOD if server else SSL.TLS_CLIENT_METHOD)
    context.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE)
    _apply_ciphers(context, settings, config_key)
    if settings.key is not None:
        context.use_privatekey(settings.key)
        context.use_certificate(settings.chain[0])
        for extra in settings.chain[1:]:
            context.add_extra_chain_cert(crypto.X509.from_cryptography(extra))
        context.check_privatekey()
    store = context.get_cert_store()
    assert store is not None
    for cert in settings.trusted:
        store.add_cert(crypto.X509.from_cryptography(cert))
    if server:
        # Sessions are resumable only on this listener (OpenSSL refuses resumption without an id context).
        # A reconnecting client resumes with the session ticket (RFC 5077, RFC 8446 4.6.1) this context
        # issued -- OpenSSL's default, never switched off here (no OP_NO_TICKET): its key lives as long as
        # the context, so a reload of the listener's TLS settings (a new context) makes the next
        # connection of each client a full handshake again.
        context.set_session_id(hashlib.sha256(settings.listener.encode()).digest()[:32])
        if settings.client_auth in ("required", "requested"):
            mode = SSL.VERIFY_PEER
            if settings.client_auth == "required":
                mode |= SSL.VERIFY_FAIL_IF_NO_PEER_CERT
            context.set_verify(mode, _chain_ok)
            if settings.trusted:
                context.set_client_ca_list([crypto.X509.from_cryptography(c).get_subject() for c in settings.trusted])
        else:
            context.set_verify(SSL.VERIFY_NONE, _chain_ok)
    else:
        if settings.trusted:
            context.set_verify(SSL.VERIFY_PEER, _chain_ok)
        else:
            context.set_default_verify_paths()
            context.set_verify(SSL.VERIFY_PEER, _chain_ok)
    return context


def _chain_ok(connection, certificate, errno, depth, ok) -> bool:
    """OpenSSL's own chain verification decides (the callback only passes its verdict on)."""
    return bool(ok)


def _subject_alternative_names(cert: x509.Certificate | None) -> list[str]:
    if cert is None:
        return []
    try:
        extension = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return sorted(str(name.value) for name in extension.value)


@implementer(IOpenSSLServerConnectionCreator)
class ServerTls:
    """A TLS listener's connection creator: the current context, replaced on reload (see module docstring)."""

    def __init__(self, config, listener: str, security_protocol: str, *, prefix: str | None = None,
                 defaults: dict[str, Any] | None = None):
        self.listener = listener
        self.security_protocol = security_protocol
        self._prefix = prefix          # and defaults: the keys of a TLS port that is not a listener (see _Keys)
        self._defaults = defaults
        self.settings = load_settings(config, listener, security_protocol=security_protocol, prefix=prefix,
                                      defaults=defaults)
        self._context = build_context(self.settings, server=True)
        self.reloads = 0
        log.info("TLS on {what}", what=self.settings.describe())

    # IOpenSSLServerConnectionCreator
    def serverConnectionForTLS(self, tlsProtocol) -> SSL.Connection:
        return SSL.Connection(self._context, None)

    def prepare(self, config) -> TlsSettings | None:
        """The settings ``config`` gives, checked; None if nothing changed.  Raises ConfigError."""
        settings = load_settings(config, self.listener, security_protocol=self.security_protocol,
                                 prefix=self._prefix, defaults=self._defaults)
        if settings.fingerprint == self.settings.fingerprint and self._same_policy(settings):
            return None
        keys = _Keys(config, self.listener, self._prefix, self._defaults)
        old, new = self.settings.certificate, settings.certificate
        if old is not None and new is not None:
            if not keys["ssl.allow.dn.changes"] and old.subject != new.subject:
                raise ConfigError(keys.name("ssl.keystore.location"),
                                  f"the new certificate's subject {new.subject.rfc4514_string()} differs from "
                                  f"{old.subject.rfc4514_string()} (set ssl.allow.dn.changes to allow it)")
            if not keys["ssl.allow.san.changes"] and \
                    _subject_alternative_names(old) != _subject_alternative_names(new):
                raise ConfigError(keys.name("ssl.keystore.location"),
                                  "the new certificate's subject alternative names differ from the current one's "
                                  "(set ssl.allow.san.changes to allow it)")
        return settings

    def _same_policy(self, settings: TlsSettings) -> bool:
        old = self.settings
        return (old.client_auth, old.protocols, old.cipher_suites, [str(r) for r in old.mapper.rules]) == \
            (settings.client_auth, settings.protocols, settings.cipher_suites, [str(r) for r in settings.mapper.rules])

    def install(self, settings: TlsSettings) -> None:
        """Serve new connections with ``settings`` (from ``prepare``); existing connections are untouched."""
        self._context = build_context(settings, server=True)
        self.settings = settings
        self.reloads += 1
        log.info("TLS reloaded on {what}; existing connections keep their session", what=settings.describe())

    def reload(self, config) -> bool:
        """Re-read the key and trust stores; whether anything changed.  Raises ConfigError (nothing changes then)."""
        settings = self.prepare(config)
        if settings is None:
            return False
        self.install(settings)
        return True

    def principal(self, transport) -> str | None:
        """``User:<mapped subject>`` of the client certificate of ``transport`` (a finished handshake), or None
        if it presented none.  Raises ``NoMatchingRule``."""
        connection = transport.getHandle()
        if not isinstance(connection, SSL.Connection):
            return None
        return self.settings.mapper.principal(connection.get_peer_certificate(as_cryptography=True))


class ClientTls:
    """The broker's own TLS connections (the controller to brokers' control planes), from a listener's keys.

    The listener's key store, if any, is the client certificate (for brokers
    requiring one); its trust store checks the server's chain; with
    ``ssl.endpoint.identification.algorithm=https`` (the default) the server
    certificate must also name the host connected to (its subject
    alternative names, DNS or IP), as Kafka's clients check it.
    """

    def __init__(self, settings: TlsSettings):
        self.settings = settings
        self._context = build_context(settings, server=False)

    @classmethod
    def from_config(cls, config, listener: str) -> ClientTls:
        return cls(load_settings(config, listener, need_key=False))

    def for_host(self, host: str) -> _ClientConnectionCreator:
        return _ClientConnectionCreator(self._context, host, self.settings.endpoint_identification == "https")


@implementer(IOpenSSLClientConnectionCreator)
class _ClientConnectionCreator:
    def __init__(self, context: SSL.Context, host: str, check_host: bool):
        self._context = context
        self._host = host
        self._check_host = check_host

    def clientConnectionForTLS(self, tlsProtocol) -> SSL.Connection:
        connection = SSL.Connection(self._context, None)
        connection.set_connect_state()
        if not _is_ip(self._host):
            connection.set_tlsext_host_name(self._host.encode("idna"))
        if self._check_host:
            connection.set_verify(SSL.VERIFY_PEER, self._verify)
        return connection

    def _verify(self, connection, certificate, errno, depth, ok) -> bool:
        if not ok:
            return False
        if depth != 0:
            return True
        from service_identity import CertificateError, VerificationError
        from service_identity.cryptography import verify_certificate_hostname, verify_certificate_ip_address

        cert = certificate.to_cryptography()
        try:
            if _is_ip(self._host):
                verify_certificate_ip_address(cert, self._host)
            else:
                verify_certificate_hostname(cert, self._host)
        except (VerificationError, CertificateError) as exc:
            log.warn("TLS server certificate does not match {host}: {error}", host=self._host, error=exc)
            return False
        return True


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


# -- failures ----------------------------------------------------------------------------------


def first_bytes_hint(first: bytes) -> str | None:
    """What the first bytes a TLS listener read say about the client, when they are not TLS."""
    if not first or first[0] in (0x14, 0x15, 0x16, 0x17):
        return None
    if len(first) >= 4 and first[0] == 0:
        return "the client sent a Kafka request in plaintext: is a PLAINTEXT client connecting to an SSL listener?"
    return "the client did not start a TLS handshake"


def describe_failure(reason, first: bytes = b"") -> str | None:
    """What went wrong in the TLS handshake behind a lost connection (a Failure), for the log and the
    connection events; None if it was not a TLS error."""
    value = getattr(reason, "value", reason)
    if isinstance(value, NoMatchingRule):
        return f"ssl.principal.mapping.rules: {value}"
    if not isinstance(value, SSL.Error):
        return None
    details: list[str] = []
    for entry in value.args[0] if value.args and isinstance(value.args[0], list) else ():
        if isinstance(entry, tuple) and entry:
            details.append(str(entry[-1]))
    text = "; ".join(dict.fromkeys(details)) or str(value) or type(value).__name__
    hint = first_bytes_hint(first)
    return text + (f" ({hint})" if hint else "")


def certificates_of(pem: bytes) -> Sequence[x509.Certificate]:
    """The certificates in a PEM blob (a helper for tools and tests)."""
    return x509.load_pem_x509_certificates(pem)
