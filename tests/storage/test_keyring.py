"""Keys: configuration, the development keyring, production refusal, and secrets that never leak."""

from __future__ import annotations

import base64
import logging
import pickle
import stat
from pathlib import Path

import orjson
import pytest
from pydantic import SecretStr

from infrastructure.application.ledger import Ledger
from infrastructure.storage.keys.keyring import (
    Keyring,
    KeyringError,
    load_keyring,
    parse_signing_keys,
)
from infrastructure.storage.settings import Settings

SECRET = b"\xab" * 32
SECRET_B64 = base64.b64encode(SECRET).decode()


def test_active_key_signs_every_key_verifies() -> None:
    ring = Keyring({"old": b"\x01" * 32, "new": b"\x02" * 32}, "new")
    key_id, tag = ring.sign(b"message")
    assert key_id == "new"
    assert ring.verify("new", b"message", tag)
    assert not ring.verify("new", b"messagE", tag)
    assert not ring.verify("old", b"message", tag)
    assert not ring.verify("missing", b"message", tag)
    old_tag = Keyring({"old": b"\x01" * 32}, "old").sign(b"m")[1]
    assert ring.verify("old", b"m", old_tag)


@pytest.mark.parametrize(
    ("raw", "active", "message"),
    [
        ("not json", None, "MACE_SIGNING_KEYS is not JSON"),
        ("[]", None, "must be a non-empty JSON object"),
        ('{"k": 5}', None, "must be a base64 string"),
        ('{"k": "***"}', None, "is not valid base64"),
        ('{"k": "' + base64.b64encode(b"short").decode() + '"}', None, "at least 32 needed"),
        ('{"bad id": "' + SECRET_B64 + '"}', None, "invalid key id"),
        ('{"a": "' + SECRET_B64 + '", "b": "' + SECRET_B64 + '"}', None, "MACE_ACTIVE_KEY_ID must"),
        ('{"a": "' + SECRET_B64 + '"}', "zz", "active key id 'zz' is not in the keyring"),
    ],
)
def test_bad_key_configuration_is_refused_without_echoing_secrets(
    raw: str, active: str | None, message: str
) -> None:
    with pytest.raises(KeyringError, match=message) as refused:
        parse_signing_keys(raw, active)
    assert SECRET_B64 not in str(refused.value)
    assert "short" not in str(refused.value)


def test_production_refuses_to_start_without_keys(tmp_path: Path) -> None:
    settings = Settings(store=f"sqlite:///{tmp_path}/m.db", env="production")
    with pytest.raises(KeyringError, match="MACE_ENV=production requires MACE_SIGNING_KEYS"):
        Ledger.open(settings)
    assert list(tmp_path.iterdir()) == []


def test_development_keyring_file_is_private_and_announced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(store=f"sqlite:///{tmp_path}/m.db")
    with caplog.at_level(logging.WARNING, logger="mace.keys"):
        first = load_keyring(settings, create=True)
    path = tmp_path / "m.db.keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "created development keyring" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mace.keys"):
        again = load_keyring(settings, create=True)
    assert caplog.text == ""  # announced once, when it was made
    assert again.key_ids == first.key_ids == ["dev-1"]
    tag = first.sign(b"x")[1]
    assert again.verify("dev-1", b"x", tag)
    secret = orjson.loads(path.read_bytes())["keys"]["dev-1"]
    assert secret not in caplog.text


def test_missing_keyring_is_not_created_by_readers(tmp_path: Path) -> None:
    settings = Settings(store=f"sqlite:///{tmp_path}/m.db")
    with pytest.raises(KeyringError, match="no keyring file"):
        load_keyring(settings, create=False)
    assert list(tmp_path.iterdir()) == []


def test_world_readable_keyring_file_is_refused(tmp_path: Path) -> None:
    settings = Settings(store=f"sqlite:///{tmp_path}/m.db")
    load_keyring(settings, create=True)
    path = tmp_path / "m.db.keys.json"
    path.chmod(0o644)
    with pytest.raises(KeyringError, match="readable by others"):
        load_keyring(settings, create=True)


def test_postgres_without_keys_needs_configuration() -> None:
    settings = Settings(store="postgresql://u:p@localhost:5432/db")
    with pytest.raises(KeyringError, match="set MACE_SIGNING_KEYS, or MACE_KEYRING_FILE"):
        load_keyring(settings, create=True)


def test_no_secret_in_reprs_or_settings(tmp_path: Path) -> None:
    raw = orjson.dumps({"k1": SECRET_B64}).decode()
    settings = Settings(
        store="postgresql://mace:hunter2-password@db:5432/mace", signing_keys=SecretStr(raw)
    )
    ring = load_keyring(settings, create=False)
    texts = [repr(ring), str(ring), repr(settings), str(settings), repr(settings.parsed_store())]
    for text in texts:
        assert SECRET_B64 not in text
        assert "hunter2" not in text
    assert repr(ring) == "Keyring(active='k1', key_ids=['k1'])"
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(ring)
