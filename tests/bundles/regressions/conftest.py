"""The keys regression tests replay with: the TEST-ONLY key here, plus any the environment names.

A regression test reads its keyring the normal way (``MACE_SIGNING_KEYS``), like any replay. The
example in this folder was exported from a store signed with ``TEST-ONLY-keyring.json``: a key
made for these tests and published with them, which signs nothing real. Tests exported from a real
store need that store's keys: put them in ``MACE_SIGNING_KEYS`` (with ``MACE_ACTIVE_KEY_ID``) when
running the suite; this fixture adds the TEST-ONLY key to them rather than replacing them.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

TEST_ONLY_KEYRING = Path(__file__).with_name("TEST-ONLY-keyring.json")


@pytest.fixture(autouse=True)
def regression_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    test_only = orjson.loads(TEST_ONLY_KEYRING.read_bytes())
    keys: dict[str, str] = dict(test_only["keys"])
    configured = os.environ.get("MACE_SIGNING_KEYS")
    if configured:
        keys |= orjson.loads(configured)
    active = os.environ.get("MACE_ACTIVE_KEY_ID") or test_only["active_key_id"]
    monkeypatch.setenv("MACE_SIGNING_KEYS", orjson.dumps(keys).decode())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", active)
