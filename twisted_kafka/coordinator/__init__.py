"""The broker's coordinators: the group coordinator today (``group``), the transaction coordinator later.

A coordinator keeps its state in an internal topic and is a collaborator of
the API handlers that serve it -- they receive it when the API table is
built, never reach it through the server.
"""
