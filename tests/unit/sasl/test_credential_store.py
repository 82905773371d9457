"""The SCRAM credential file: salted only, private, replaced atomically, read back after a restart."""

from __future__ import annotations

import json
import os
import stat

import pytest
from twisted.internet.defer import ensureDeferred

from twisted_kafka.sasl.credential_store import STORE_FILE, FileScramCredentialStore
from twisted_kafka.sasl.scram_credentials import SCRAM_SHA_256, SCRAM_SHA_512, credential_from_password


def alter(store, upsertions=(), deletions=()):
    failures = []
    ensureDeferred(store.alter(upsertions, deletions)).addErrback(failures.append)
    if failures:
        failures[0].raiseException()


def test_credentials_survive_a_new_store_and_never_contain_the_password(tmp_path):
    store = FileScramCredentialStore(str(tmp_path))
    credential = credential_from_password(SCRAM_SHA_256, "very-secret-password")
    alter(store, [("alice", "SCRAM-SHA-256", credential),
                  ("alice", "SCRAM-SHA-512", credential_from_password(SCRAM_SHA_512, "very-secret-password"))])
    text = (tmp_path / STORE_FILE).read_text()
    assert "very-secret-password" not in text
    assert stat.S_IMODE(os.stat(tmp_path / STORE_FILE).st_mode) == 0o600
    assert json.loads(text)["users"]["alice"]["SCRAM-SHA-256"] == credential.to_text()
    reloaded = FileScramCredentialStore(str(tmp_path))
    assert reloaded.get("alice", "SCRAM-SHA-256") == credential
    alter(reloaded, deletions=[("alice", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512")])
    assert FileScramCredentialStore(str(tmp_path)).users() == {}


def test_a_failed_write_changes_nothing_and_leaves_no_temporary_file(tmp_path):
    store = FileScramCredentialStore(str(tmp_path))
    alter(store, [("alice", "SCRAM-SHA-256", credential_from_password(SCRAM_SHA_256, "a"))])
    before = (tmp_path / STORE_FILE).read_bytes()
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(tmp_path, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(OSError):
            alter(store, [("bob", "SCRAM-SHA-256", credential_from_password(SCRAM_SHA_256, "b"))])
    finally:
        os.chmod(tmp_path, 0o700)
    assert store.get("bob", "SCRAM-SHA-256") is None
    assert (tmp_path / STORE_FILE).read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [STORE_FILE]


def test_an_unreadable_file_is_an_error_naming_it(tmp_path):
    (tmp_path / STORE_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=STORE_FILE):
        FileScramCredentialStore(str(tmp_path))


def test_the_file_is_private_even_over_a_world_readable_leftover(tmp_path):
    (tmp_path / (STORE_FILE + ".tmp")).write_bytes(b"left by a crash")
    os.chmod(tmp_path / (STORE_FILE + ".tmp"), 0o644)
    store = FileScramCredentialStore(str(tmp_path))
    alter(store, [("bob", "SCRAM-SHA-256", credential_from_password(SCRAM_SHA_256, "pw"))])
    assert stat.S_IMODE(os.stat(tmp_path / STORE_FILE).st_mode) == 0o600
