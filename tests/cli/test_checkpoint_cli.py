"""``mace checkpoint public-key``: the public half of the checkpoint key, on SQLite and PostgreSQL.

It prints the PEM alone (or ``--json``: key_id and public_key); a key that cannot be used is one
line ``mace: INVALID_INPUT: ...``, exit 2, and nothing is written.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from support.ledger_fixtures import development_env, mace_process, run

from infrastructure.storage.settings import Settings


def new_key_file(directory: Path) -> Path:
    path = directory / "checkpoint.pem"
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)
    return path


def raw_public(pem: str) -> bytes:
    key = serialization.load_pem_public_key(pem.encode())
    assert isinstance(key, Ed25519PublicKey)
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_public_key_prints_the_configured_keys_public_half_on_both_stores(
    cli_env: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = new_key_file(tmp_path)
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(path))
    code, out, err = run(capsys, "checkpoint", "public-key")
    assert (code, err) == (0, "")
    assert out.startswith("-----BEGIN PUBLIC KEY-----\n")
    assert out.endswith("-----END PUBLIC KEY-----\n")
    raw = raw_public(out)
    code, out_json, err = run(capsys, "checkpoint", "public-key", "--json")
    assert (code, err) == (0, "")
    answer = orjson.loads(out_json)
    assert answer == {"key_id": hashlib.sha256(raw).hexdigest()[:16], "public_key": out}
    private_body = path.read_bytes().splitlines()[1].decode()
    assert private_body not in out + out_json


def test_without_a_checkpoint_key_sqlite_makes_one_and_postgres_refuses_in_one_line(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MACE_CHECKPOINT_KEY")
    store = cli_env.parsed_store()
    code, out, err = run(capsys, "checkpoint", "public-key")
    if store.development_file(".checkpoint-key.pem") is not None:
        assert code == 0  # SQLite: the development key, made beside the store
        return
    assert (code, out) == (2, "")
    assert err == (
        f"mace: INVALID_INPUT: no checkpoint key for {store.describe()}: set MACE_CHECKPOINT_KEY"
        " (the path of an Ed25519 private key, PEM)\n"
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "does not exist"),
        (b"not a key at all", "is not PEM"),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "is not a PEM private"),
    ],
    ids=["missing", "not-pem", "not-a-key"],
)
def test_a_bad_key_file_is_one_line_exit_2_and_nothing_is_written(
    content: bytes | None,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "checkpoint.pem"
    if content is not None:
        path.write_bytes(content)
    before = sorted(tmp_path.iterdir())
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/mace.db")
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(path))
    code, out, err = run(capsys, "checkpoint", "public-key")
    assert (code, out) == (2, "")
    assert err.startswith(f"mace: INVALID_INPUT: checkpoint key {path} {problem}"), err
    assert err.count("\n") == 1
    assert sorted(tmp_path.iterdir()) == before


def test_production_refuses_without_a_checkpoint_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/mace.db")
    monkeypatch.setenv("MACE_ENV", "production")
    monkeypatch.delenv("MACE_CHECKPOINT_KEY", raising=False)
    assert run(capsys, "checkpoint", "public-key") == (
        2,
        "",
        "mace: INVALID_INPUT: MACE_ENV=production requires MACE_CHECKPOINT_KEY"
        " (the path of an Ed25519 private key, PEM)\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_the_development_key_is_made_once_and_announced_by_the_command_that_made_it(
    tmp_path: Path,
) -> None:
    env = development_env(f"sqlite:///{tmp_path}/mace.db")
    key_file = tmp_path / "mace.db.checkpoint-key.pem"

    first = mace_process(env, "checkpoint", "public-key")
    assert first.returncode == 0, first.stderr
    assert first.stderr == (
        f"mace: warning: created development checkpoint key {key_file};"
        " set MACE_CHECKPOINT_KEY for real use\n"
    )
    assert key_file.stat().st_mode & 0o777 == 0o600

    again = mace_process(env, "checkpoint", "public-key")
    assert (again.returncode, again.stderr, again.stdout) == (0, "", first.stdout)
    raw_public(again.stdout)
