"""Running the operator tools as a user does: the installed console scripts, or bin/ wrappers, as processes.

The scripts are those ``pip install`` put next to the checkout's Python
(``.venv/bin/twisted-kafka-topics`` ...); they run with ``user_env()``, a
shell's environment without an activated virtualenv, from ``/`` -- so a
test passes only if the command works the way docs/tools.md shows it.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.user_env import user_env

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = Path(sys.executable).parent


@dataclass
class Ran:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def run(tool: str, *args: str, input: str | None = None, timeout: float = 60, wrapper: bool = False) -> Ran:
    """``twisted-kafka-<tool> args...`` (the installed console script, or ``bin/`` with ``wrapper``)."""
    path = (REPO_ROOT / "bin" if wrapper else SCRIPTS) / f"twisted-kafka-{tool}"
    done = subprocess.run([str(path), *args], input=input, capture_output=True, text=True, timeout=timeout,
                          env=user_env(), cwd="/")
    return Ran(done.returncode, done.stdout, done.stderr)


def ok(tool: str, *args: str, **kwargs) -> Ran:
    """``run``, which must succeed with nothing on standard error."""
    ran = run(tool, *args, **kwargs)
    assert ran.code == 0 and not ran.err_lines, (ran.code, ran.out, ran.err)
    return ran


def fails(tool: str, *args: str, **kwargs) -> str:
    """``run``, which must fail with exit status 1 and one line on standard error: that line."""
    ran = run(tool, *args, **kwargs)
    assert ran.code == 1, (ran.code, ran.out, ran.err)
    assert len(ran.err_lines) == 1, ran.err
    return ran.err_lines[0]
