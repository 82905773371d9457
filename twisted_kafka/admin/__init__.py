"""The admin REST endpoint: connection statistics, connection quotas, metrics, health, a dashboard.

A ``twisted.web`` site on its own listener (``admin.rest.listener``), run by
``AdminRestService`` as a child service of the broker.  It reads the network
layer's statistics through ``SocketServer`` and changes quotas through the
same ``AdminManager`` and ``DynamicBrokerConfig`` as the AlterConfigs
handler, so a change made here and one made by a Kafka admin client are the
same change.  Its HTTP channel (``channel.py``) decides each request on its
headers -- ``Host``, token, route, announced size -- before reading a body,
keeps bodies in memory, and gives each request a deadline.  See
docs/admin-rest.md.
"""

from .service import AdminRestService
from .settings import AdminRestSettings

__all__ = ["AdminRestService", "AdminRestSettings"]
