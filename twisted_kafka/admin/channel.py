"""The admin endpoint's HTTP channel: requests are decided on their headers, bodies stay small and in memory,
and a request must arrive in full within a deadline.

``twisted.web`` on its own reads a request's whole body before any resource
sees it, spools a body of unknown or large length (over 100 kB, or chunked)
to a temporary file, and restarts its idle timeout on every byte received.
An unauthenticated client could therefore make the broker read and store
gigabytes before its 401, fill the disk the logs live on, and hold
connections open by trickling bytes.  Here:

* when the headers have arrived, ``AdminResource.check`` (``Host``, token,
  route, method) and the announced ``Content-Length`` against
  ``admin.rest.request.max.bytes`` decide before a byte of the body is read
  -- and before ``100 Continue`` is sent; a refusal is answered at once
  (JSON, ``Connection: close``) and the connection closed, and nothing it
  sends afterwards is parsed;
* a body is kept in a ``BytesIO``: its length is within the limit, and a
  chunked body is refused with 413 the moment it passes it;
* ``admin.rest.request.timeout.ms`` is a deadline, not an idle timeout: it
  runs from the moment the connection opens or its previous response is
  written until the next request has arrived in full, and received bytes do
  not restart it.  When it passes, a connection holding part of a request
  gets 408; every one is closed (and aborted ``abortTimeout`` seconds later
  if its peer does not read).  While a request is being handled the
  deadline does not run: an AlterConfigs through the controller may take a
  while.
"""

from __future__ import annotations

from http import HTTPStatus
from io import BytesIO
from urllib.parse import unquote_to_bytes

from twisted.protocols.basic import LineReceiver
from twisted.web.http import HTTPChannel
from twisted.web.server import Request, Site

from .settings import MAX_BYTES_KEY, TIMEOUT_KEY
from .web import WWW_AUTHENTICATE, AdminResource, HttpError, error_body, path_of


def too_large(limit: int) -> HttpError:
    return HttpError(413, "PAYLOAD_TOO_LARGE", f"the body is larger than {limit} bytes ({MAX_BYTES_KEY})")


def refusal_bytes(exc: HttpError, *, head: bool = False) -> bytes:
    """A complete response to a request refused before it was read in full; the connection closes after it."""
    body = error_body(exc)
    lines = [f"HTTP/1.1 {exc.status} {HTTPStatus(exc.status).phrase}", "Content-Type: application/json",
             "Cache-Control: no-store", f"Content-Length: {len(body)}", "Connection: close"]
    if exc.status == 401:
        lines.append(f"WWW-Authenticate: {WWW_AUTHENTICATE}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body)


class AdminRequest(Request):
    """A request whose body is held in memory, and stopped at ``admin.rest.request.max.bytes``."""

    channel: AdminChannel

    def gotLength(self, length):
        # Never a file: a longer Content-Length was refused on the headers, and handleContentChunk stops a
        # chunked body at the limit.
        self.content = BytesIO()

    def handleContentChunk(self, data):
        channel = self.channel
        if channel.refused:
            return
        content = self.content
        assert content is not None          # made by gotLength, before any of the body
        limit = channel.site.max_request_bytes
        if content.tell() + len(data) > limit:
            channel.refuse(too_large(limit))
            return
        content.write(data)


class AdminChannel(HTTPChannel):
    site: AdminSite

    #: True once a request was refused or timed out: the answer is written and nothing more is parsed.
    refused = False
    #: Bytes of a request that has not arrived in full have been received (a timeout then answers 408).
    _partial = False

    def dataReceived(self, data):
        # HTTPChannel.dataReceived would also resetTimeout(): the deadline would restart with every byte.
        if self.refused:
            return
        if not self._handlingRequest:
            self._partial = True
        LineReceiver.dataReceived(self, data)

    def lineReceived(self, line):
        if not self.refused:
            super().lineReceived(line)

    def rawDataReceived(self, data):
        if not self.refused:
            super().rawDataReceived(data)

    def allHeadersReceived(self):
        request = self.requests[-1]
        method = self._command.decode("ascii", "replace")
        postpath = [unquote_to_bytes(segment) for segment in self._path.split(b"?", 1)[0][1:].split(b"/")]
        try:
            self.site.resource.check(method, path_of(postpath), request.requestHeaders, self.getHost().host)
        except HttpError as exc:
            self.refuse(exc)
            return
        limit = self.site.max_request_bytes
        if self.length is not None and self.length > limit:
            self.refuse(too_large(limit))
            return
        super().allHeadersReceived()

    def allContentReceived(self):
        if self.refused:
            return
        self._partial = False
        super().allContentReceived()

    def refuse(self, exc: HttpError) -> None:
        """Answer ``exc`` now, close the connection, and read nothing more of it."""
        if self.refused:
            return
        self.refused = True
        self.setTimeout(None)
        self.write(refusal_bytes(exc, head=getattr(self, "_command", b"") == b"HEAD"))
        self.loseConnection()
        if self.abortTimeout is not None:       # as HTTPChannel.timeoutConnection: a peer that does not read
            self._abortingCall = self.callLater(self.abortTimeout, self.forceAbortClient)

    def timeoutConnection(self):
        if self._partial and not self.refused:
            self.refused = True
            self.write(refusal_bytes(HttpError(
                408, "REQUEST_TIMEOUT", f"the request did not arrive in full within {self.timeOut:g} s "
                                        f"({TIMEOUT_KEY})")))
        self.refused = True
        super().timeoutConnection()


class AdminSite(Site):
    """The admin endpoint's site: ``AdminChannel`` connections, no access log, no form parsing."""

    protocol = AdminChannel     # type: ignore[assignment]
    requestFactory = AdminRequest
    noisy = False
    displayTracebacks = False

    def __init__(self, resource: AdminResource, *, max_request_bytes: int, request_timeout: float,
                 reactor=None):
        super().__init__(resource, timeout=request_timeout, reactor=reactor, parsePOSTFormSubmission=False)
        self.resource: AdminResource = resource
        self.max_request_bytes = max_request_bytes

    def log(self, request) -> None:
        """No access-log lines: the dashboard polls every second, and would flood the broker's log."""


__all__ = ["AdminChannel", "AdminRequest", "AdminSite"]
