"""``StartupError``: a reason the broker cannot start that an operator can act on.

Its message is complete in one line — which file or setting, what is wrong,
and what to do — so startup logs it as ``Broker startup failed: <message>``
without a traceback (a traceback is kept for failures nobody anticipated).
"""

from __future__ import annotations


class StartupError(Exception):
    """The broker cannot start; ``str()`` says why and what to do, in one line."""
