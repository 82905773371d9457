"""Indexes of the independent client encoders the protocol tests check against."""

from __future__ import annotations

import importlib
import inspect
import re
import struct

from aiokafka.protocol import types as ak
from aiokafka.protocol.api import Request

_AIOKAFKA_MODULES = ("admin", "commit", "coordination", "fetch", "group", "metadata", "offset", "produce",
                     "transaction")


def _aiokafka_structs():
    """The request structs aiokafka can actually send (those its ``Request``
    builders choose from) and their response structs. Unused structs are left
    out on purpose: some are wrong (ListOffsets v4/v5 type current_leader_epoch
    as INT64) and aiokafka never sends them."""
    requests, responses = {}, {}
    for name in _AIOKAFKA_MODULES:
        module = importlib.import_module(f"aiokafka.protocol.{name}")
        for obj in vars(module).values():
            if not (inspect.isclass(obj) and issubclass(obj, Request) and obj is not Request):
                continue
            for struct_class in obj._CLASSES:
                # Keyed by the version in the class *name*: aiokafka's ListGroupsRequest_v2
                # says API_VERSION = 1 (aiokafka/protocol/admin.py), but its schema is v2's.
                version = int(re.search(r"_v(\d+)$", struct_class.__name__).group(1))
                requests[(obj.API_KEY, version)] = struct_class
                response = struct_class.RESPONSE_TYPE
                named = getattr(module, re.sub(r"Request(_v\d+)$", r"Response\1", struct_class.__name__), None)
                if named is not None and named is not response and named.SCHEMA is not response.SCHEMA:
                    # aiokafka pairs this request with another version's response
                    # struct; check our bytes against the correct schema and record it.
                    PAIRING_DEFECTS[(obj.API_KEY, version)] = (response.__name__, named.__name__)
                    response = named
                responses[(obj.API_KEY, version)] = response
    return requests, responses


#: (api_key, version) -> (response struct aiokafka uses, the one matching the version).
#: DescribeGroups v3 is parsed with the v2 struct, which lacks authorized_operations:
#: aiokafka mis-reads any v3 response describing more than one group.
PAIRING_DEFECTS: dict[tuple[int, int], tuple[str, str]] = {}


#: (api_key, version) -> aiokafka request struct / response struct class
AIOKAFKA_REQUESTS, AIOKAFKA_RESPONSES = _aiokafka_structs()


def aiokafka_request_frame(struct_class, args, version: int, correlation_id: int, client_id: str) -> bytes:
    """A request frame (no size prefix) exactly as aiokafka's connection writes it."""
    request = struct_class(*args)
    if version == struct_class.API_VERSION:
        header = request.build_request_header(correlation_id=correlation_id, client_id=client_id).encode()
    else:  # the mislabelled struct: write the header aiokafka would write for the right version
        header = (struct.pack(">hhi", struct_class.API_KEY, version, correlation_id)
                  + ak.String("utf-8").encode(client_id))
        if struct_class.FLEXIBLE_VERSION:
            header += b"\x00"
    return header + request.encode()
