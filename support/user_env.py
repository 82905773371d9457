"""The environment of a user's shell in which no virtualenv is activated, for commands the docs show.

The test session runs in the checkout's ``.venv`` (and the Spark fixtures set
``PYSPARK_PYTHON`` and ``PYTHONPATH``); a user who types ``bin/...`` or
``.venv/bin/python job.py`` has none of that: ``python3`` on their ``PATH``
is the system's, without twisted_kafka.  ``user_env()`` is ``os.environ``
with the virtualenvs' ``bin`` directories taken off ``PATH`` and the
variables that point Python or Spark at them removed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["user_env", "system_python_lacks_twisted_kafka"]

#: What activating a virtualenv or the Spark test fixtures set, and a user's shell has not.
REMOVED = ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def user_env() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in REMOVED}
    venvs = {Path(p).resolve() for p in (sys.prefix, os.environ.get("VIRTUAL_ENV")) if p}

    def inside_a_venv(entry: str) -> bool:
        path = Path(entry).resolve()
        return any(path == venv or venv in path.parents for venv in venvs)

    env["PATH"] = os.pathsep.join(e for e in os.environ.get("PATH", "").split(os.pathsep)
                                  if e and not inside_a_venv(e))
    return env


def system_python_lacks_twisted_kafka(env: dict[str, str]) -> bool:
    """Whether ``python3`` on ``env``'s ``PATH`` cannot import twisted_kafka: the situation the docs' commands
    must work in (a test of them proves nothing otherwise)."""
    probe = subprocess.run(["python3", "-c", "import twisted_kafka"], env=env, cwd="/", capture_output=True,
                           timeout=60)
    return probe.returncode != 0
