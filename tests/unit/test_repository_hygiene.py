"""What the repository keeps out: key material where the docs make it, and binaries."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                                reason="needs a git checkout")


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def files_the_security_docs_make() -> list[str]:
    """Every file the openssl walk-through of docs/security.md writes, relative to the checkout."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    block = text[text.index("mkdir -p etc/ssl && cd etc/ssl"):]
    block = block[:block.index("```")]
    names = re.findall(r"(?:-keyout|-out|>)\s+(\S+)", block)
    return [f"etc/ssl/{name}" for name in names]


def test_the_key_material_the_docs_make_is_ignored():
    made = files_the_security_docs_make()
    assert {"etc/ssl/ca.key", "etc/ssl/broker.pem", "etc/ssl/alice.key"} <= set(made)
    for path in [*made, "etc/ssl/anything", "some/where/client.key", "truststore.p12"]:
        assert git("check-ignore", "-q", "--no-index", path).returncode == 0, f"{path} is not ignored"


def test_no_binary_is_committed():
    # git ls-files --eol: "i/-text" marks a file git sees as binary.
    listed = git("ls-files", "--eol").stdout.splitlines()
    binary = [line.split("\t", 1)[1] for line in listed if line.startswith("i/-text")]
    assert binary == []
