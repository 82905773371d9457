"""AdminRestService: the admin endpoint's listener, as a child service of the broker.

It binds ``admin.rest.listener`` when started (so a port that cannot be
bound stops startup with one line naming the key) and logs the address it
bound -- port 0 included -- as ``Admin REST endpoint listening on <url>``.
The listener is the admin endpoint's own: the broker's connection quotas do
not apply to it, so health checks and operators get in when clients cannot.

https reads ``admin.rest.ssl.*`` with the TLS listeners' loader
(``twisted_kafka.network.tls``): the same PEM and PKCS12 key and trust
stores, key passwords, the broker-wide ``ssl.enabled.protocols`` and
``ssl.cipher.suites``, and errors naming the ``admin.rest.ssl.*`` key.  With
a trust store, clients must present a certificate one of its CAs signed
(``ssl.client.auth=required``); without one, none is asked for.
``reload_tls`` re-reads the stores as a listener's reload does: new
connections get the new certificate, open ones keep theirs.
"""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import SSL4ServerEndpoint, TCP4ServerEndpoint, TCP6ServerEndpoint
from twisted.internet.error import CannotListenError
from twisted.logger import Logger

from twisted_kafka.config import ConfigError, StartupError
from twisted_kafka.network.tls import ServerTls

from .channel import AdminSite
from .hosts import HostRule
from .settings import LISTENER_KEY, TLS_PREFIX, AdminRestSettings
from .web import AdminBackend, AdminResource


class AdminRestService(Service):
    log = Logger(namespace="twisted_kafka.admin.AdminRestService")

    #: The admin endpoint's name in TLS logs and in the outcome of a certificate reload (named after its keys'
    #: prefix, ``admin.rest.ssl.*``).
    TLS_NAME = "admin.rest"

    def __init__(self, settings: AdminRestSettings, backend: AdminBackend, reactor, config):
        self.settings = settings
        self.backend = backend
        self.reactor = reactor
        self.resource = AdminResource(backend, settings.token, HostRule(settings.host, settings.allowed_hosts))
        self.site = AdminSite(self.resource, max_request_bytes=settings.max_request_bytes,
                              request_timeout=settings.request_timeout, reactor=reactor)
        self.port = None
        self.tls: ServerTls | None = None
        if settings.scheme == "https":
            self.tls = ServerTls(config, self.TLS_NAME, "SSL", prefix=TLS_PREFIX,
                                 defaults=self._tls_defaults(settings))

    @property
    def url(self) -> str:
        """The URL with the port actually bound (after start)."""
        port = self.port.getHost().port if self.port is not None else self.settings.port
        host = self.settings.host
        if ":" in host:
            host = f"[{host}]"
        return f"{self.settings.scheme}://{host}:{port}"

    @staticmethod
    def _tls_defaults(settings: AdminRestSettings) -> dict:
        return {"ssl.client.auth": "required" if settings.truststore else "none"}

    def reload_tls(self, config) -> str | None:
        """Re-read the https key and trust stores: "reloaded", "unchanged" or the error (the old certificate
        stays); None without https."""
        if self.tls is None:
            return None
        try:
            return "reloaded" if self.tls.reload(config) else "unchanged"
        except ConfigError as exc:
            self.log.error("TLS of the admin REST endpoint not reloaded: {error}", error=exc)
            return str(exc)

    def _endpoint(self):
        host, port = self.settings.host, self.settings.port
        if self.tls is not None:
            return SSL4ServerEndpoint(self.reactor, port, self.tls, interface=host)
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
