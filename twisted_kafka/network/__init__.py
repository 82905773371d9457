"""The Twisted network layer: Kafka's SocketServer, re-expressed on one reactor.

``SocketServer`` owns an ``Acceptor`` per listener; each accepted connection
is a ``Processor`` (framing, muting, response order) feeding its plane's
``RequestChannel``; ``ConnectionQuotas`` is shared by every listener of both
planes.  See docs/architecture.md.
"""
