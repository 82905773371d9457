"""AdminRestService: the admin endpoint's listener, as a child service of the broker.

It binds ``admin.rest.listener`` when started (so a port that cannot be
bound stops startup with one line naming the key) and logs the address it
bound -- port 0 included -- as ``Admin REST endpoint listening on <url>``.
The listener is the admin endpoint's own: the broker's connection quotas do
not apply to it, so health checks and operators get in when clients cannot.

https uses the PEM files of ``admin.rest.ssl.keystore.location``
(certificate chain and private key) and, when set,
``admin.rest.ssl.truststore.location`` (CA certificates; clients must then
present a certificate they sign).
"""

from __future__ import annotations

from pathlib import Path

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import SSL4ServerEndpoint, TCP4ServerEndpoint, TCP6ServerEndpoint
from twisted.internet.error import CannotListenError
from twisted.logger import Logger
from twisted.web.server import Site

from twisted_kafka.config import StartupError

from .settings import KEYSTORE_KEY, LISTENER_KEY, TRUSTSTORE_KEY, AdminRestSettings
from .web import AdminBackend, AdminResource


def tls_options(keystore: str, truststore: str | None):
    """pyOpenSSL context options from PEM files; raises ``StartupError`` naming the key."""
    from twisted.internet import ssl

    try:
        pem = Path(keystore).read_bytes()
        certificate = ssl.PrivateCertificate.loadPEM(pem)
    except Exception as exc:
        raise StartupError(KEYSTORE_KEY, keystore, f"cannot load a PEM certificate and key: {exc}") from None
    chain = [ssl.Certificate.loadPEM(block).original for block in _pem_blocks(pem)[1:]]
    if not truststore:
        return ssl.CertificateOptions(privateKey=certificate.privateKey.original, certificate=certificate.original,
                                      extraCertChain=chain or None)
    try:
        authorities = [ssl.Certificate.loadPEM(block) for block in _pem_blocks(Path(truststore).read_bytes())]
    except Exception as exc:
        raise StartupError(TRUSTSTORE_KEY, truststore, f"cannot load PEM CA certificates: {exc}") from None
    if not authorities:
        raise StartupError(TRUSTSTORE_KEY, truststore, "no certificate in the file")
    return ssl.CertificateOptions(privateKey=certificate.privateKey.original, certificate=certificate.original,
                                  extraCertChain=chain or None, verify=True,
                                  caCerts=[a.original for a in authorities], requireCertificate=True)


def _pem_blocks(data: bytes) -> list[bytes]:
    end = b"-----END CERTIFICATE-----"
    blocks = []
    for part in data.split(end)[:-1]:
        start = part.find(b"-----BEGIN CERTIFICATE-----")
        if start >= 0:
            blocks.append(part[start:] + end + b"\n")
    return blocks


class QuietSite(Site):
    """A Site without access-log lines: the dashboard polls every second, and would flood the broker's log."""

    def log(self, request) -> None:
        pass


class AdminRestService(Service):
    log = Logger(namespace="twisted_kafka.admin.AdminRestService")

    def __init__(self, settings: AdminRestSettings, backend: AdminBackend, reactor):
        self.settings = settings
        self.backend = backend
        self.reactor = reactor
        self.resource = AdminResource(backend, settings.token)
        self.site = QuietSite(self.resource)
        self.site.noisy = False
        self.site.displayTracebacks = False
        self.port = None
        self._tls = (tls_options(settings.keystore, settings.truststore)
                     if settings.scheme == "https" and settings.keystore else None)

    @property
    def url(self) -> str:
        """The URL with the port actually bound (after start)."""
        port = self.port.getHost().port if self.port is not None else self.settings.port
        host = self.settings.host
        if ":" in host:
            host = f"[{host}]"
        return f"{self.settings.scheme}://{host}:{port}"

    def _endpoint(self):
        host, port = self.settings.host, self.settings.port
        if self._tls is not None:
            return SSL4ServerEndpoint(self.reactor, port, self._tls, interface=host)
        if ":" in host:
            return TCP6ServerEndpoint(self.reactor, port, interface=host)
        return TCP4ServerEndpoint(self.reactor, port, interface=host)

    def startService(self) -> Deferred:
        super().startService()
        d = self._endpoint().listen(self.site)

        def listening(port):
            self.port = port
            self.log.info("Admin REST endpoint listening on {url}", url=self.url)

        def failed(failure):
            failure.trap(CannotListenError)
            raise StartupError(LISTENER_KEY, self.settings.url, str(failure.value))

        return d.addCallbacks(listening, failed)

    def stopService(self):
        super().stopService()
        port, self.port = self.port, None
        if port is not None:
            return port.stopListening()
        return None
