"""SASL authentication on the broker's side (KIP-43, KIP-84, KIP-152).

Sans-IO pieces a SASL listener's connections use before any other API is
served: the mechanisms (``plain``: RFC 4616, ``scram``: RFC 5802/7677), the
per-connection ``SaslServerAuthenticator`` that runs a handshake and an
exchange on bytes, the salted SCRAM credentials (``scram_credentials``),
the store that keeps them (``credential_store``) and each listener's settings
checked at startup (``listener_config``); ``bin/twisted-kafka-scram``, which
manages the credentials, is an operator tool (``twisted_kafka/tools/scram.py``).
The network layer feeds
the authenticator the SaslHandshake / SaslAuthenticate requests (or the raw
tokens of a v0 handshake) and acts on what it answers; nothing here touches a
socket.
"""
