"""The admin endpoint's settings, checked when the broker is built.

``admin.rest.listener`` is ``http://host:port`` or ``https://host:port``.
An endpoint reachable beyond the loopback interface must be protected: a
non-loopback address without ``admin.rest.auth.token`` (or its file) and
without https is refused at startup, naming the key, so an operator cannot
expose connection control to the network by accident.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from twisted_kafka.config import StartupError

LISTENER_KEY = "admin.rest.listener"
TOKEN_KEY = "admin.rest.auth.token"
TOKEN_FILE_KEY = "admin.rest.auth.token.file"
KEYSTORE_KEY = "admin.rest.ssl.keystore.location"
TRUSTSTORE_KEY = "admin.rest.ssl.truststore.location"
MAX_BYTES_KEY = "admin.rest.request.max.bytes"
TIMEOUT_KEY = "admin.rest.request.timeout.ms"
ALLOWED_HOSTS_KEY = "admin.rest.allowed.hosts"
#: https is read by the TLS listeners' loader with this prefix (``network.tls``): these keys.
TLS_PREFIX = "admin.rest."
TLS_KEYS = ("admin.rest.ssl.keystore.type", KEYSTORE_KEY, "admin.rest.ssl.keystore.password",
            "admin.rest.ssl.key.password", "admin.rest.ssl.truststore.type", TRUSTSTORE_KEY,
            "admin.rest.ssl.truststore.password")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class AdminRestSettings:
    scheme: str                      # "http" or "https"
    host: str
    port: int
    token: str | None
    keystore: str | None
    truststore: str | None
    #: ``admin.rest.request.max.bytes``: the largest body, checked on the headers (``channel``).
    max_request_bytes: int = 65536
    #: ``admin.rest.request.timeout.ms``, in seconds: the time to send a whole request (``channel``).
    request_timeout: float = 10.0
    #: ``admin.rest.allowed.hosts``: further ``Host`` names served without a token (``hosts``).
    allowed_hosts: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @classmethod
    def from_config(cls, config) -> AdminRestSettings | None:
        """The settings, or None when ``admin.rest.listener`` is empty; raises ``StartupError``."""
        listener = (config[LISTENER_KEY] or "").strip()
        if not listener:
            return None
        parts = urlsplit(listener)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("http", "https") or parts.hostname is None or port is None \
                or parts.path not in ("", "/"):
            raise StartupError(LISTENER_KEY, listener, "expected http://host:port or https://host:port")
        host = parts.hostname
        token = _token(config)
        keystore = config[KEYSTORE_KEY]
        truststore = config[TRUSTSTORE_KEY]
        if parts.scheme == "https" and not keystore:
            raise StartupError(KEYSTORE_KEY, "", f"an https {LISTENER_KEY} needs a certificate and key")
        if not is_loopback(host) and token is None and parts.scheme != "https":
            raise StartupError(LISTENER_KEY, listener,
                               f"a non-loopback admin endpoint needs {TOKEN_KEY} (or {TOKEN_FILE_KEY}) "
                               f"or https ({KEYSTORE_KEY})")
        return cls(parts.scheme, host, port, token, keystore, truststore,
                   max_request_bytes=config[MAX_BYTES_KEY], request_timeout=config[TIMEOUT_KEY] / 1000.0,
                   allowed_hosts=tuple(name.strip() for name in config[ALLOWED_HOSTS_KEY] if name.strip()))


def _token(config) -> str | None:
    token = config[TOKEN_KEY]
    if token is not None:
        token = token.value if hasattr(token, "value") else str(token)
        if token:
            return token
    path = config[TOKEN_FILE_KEY]
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise StartupError(TOKEN_FILE_KEY, path, str(exc)) from None
        if not text:
            raise StartupError(TOKEN_FILE_KEY, path, "the file is empty")
        return text
    return None
