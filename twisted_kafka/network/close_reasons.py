"""Why a connection closed: the reasons ConnectionQuotas counts and operators see.

Shared by the network layer (which closes connections) and the layers that
ask it to (an acks=0 Produce that failed, a response that cannot be
encoded), so they name the reason without touching a connection.
"""


class CloseReason:
    CLIENT = "client"
    IDLE = "idle"
    QUOTA = "quota"
    PROTOCOL_ERROR = "protocol_error"
    AUTHENTICATION = "authentication"
    PRODUCE_ERROR = "produce_error"   # an acks=0 Produce failed: closing tells the producer (Kafka does the same)
    TLS = "tls"
    SHUTDOWN = "shutdown"
    ADMIN = "admin"                   # an operator closed it (the admin REST endpoint's DELETE)
    # A controller API refused because its sender is not who it claims to be (principal, controller,
    # broker id, cluster, broker epoch): each guess costs a connection.
    CONTROLLER_REFUSED = "controller_refused"


__all__ = ["CloseReason"]
