"""API handlers, one module per API family; ``build_handlers`` lists what the broker serves.

The list is the whole truth about served APIs: KafkaApis dispatches to these
and ApiVersions advertises exactly their keys, so an API is advertised the
moment its handler exists and never before.
"""

from __future__ import annotations


def build_handlers(server) -> list:
    from .api_versions import ApiVersionsHandler
    from .metadata import MetadataHandler

    return [
        ApiVersionsHandler(server.apis),
        MetadataHandler(server),
    ]
