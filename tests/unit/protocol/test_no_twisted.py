"""The protocol package is sans-IO: importing it (and everything in it) loads no Twisted."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import twisted_kafka.protocol

REPO = Path(__file__).resolve().parents[3]


def _all_protocol_modules() -> list[str]:
    package = twisted_kafka.protocol
    return sorted(name for _, name, _ in pkgutil.walk_packages(package.__path__, package.__name__ + "."))


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


def test_importing_the_protocol_package_loads_no_twisted():
    result = _run("import sys, twisted_kafka.protocol; "
                  "assert not [m for m in sys.modules if m.startswith('twisted.')], "
                  "[m for m in sys.modules if m.startswith('twisted.')]")
    assert result.returncode == 0, result.stderr


def test_importing_every_protocol_module_loads_no_twisted():
    modules = _all_protocol_modules()
    assert "twisted_kafka.protocol.codec" in modules and "twisted_kafka.protocol.fetch_response" in modules
    imports = "; ".join(f"import {name}" for name in modules)
    result = _run(f"import sys; {imports}; "
                  "bad = [m for m in sys.modules if m == 'twisted' or m.startswith('twisted.')]; "
                  "assert not bad, bad")
    assert result.returncode == 0, result.stderr
