"""``mace checkpoint`` and ``mace checkpoint public-key``, on SQLite and PostgreSQL.

``mace checkpoint [--json]`` writes a checkpoint of every event saved so far (none when the newest
already covers them) and prints its number, size and root. ``public-key`` prints the PEM alone
(or ``--json``: key_id and public_key), and every checkpoint's signature verifies under it; a key
that cannot be used is one line ``mace: INVALID_INPUT: ...``, exit 2, and nothing is written.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from support.checkpoint_chain import assert_covers_every_event, chain, new_key_file
from support.ledger_fixtures import development_env, mace_process, run

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings


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


# --- `mace checkpoint` ----------------------------------------------------------------------------


def test_mace_checkpoint_json_and_a_signature_the_public_key_verifies(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
        ledger.sem.put("world/country/fr/capital", "Paris")  # saved, not yet checkpointed
    code, out, err = run(capsys, "checkpoint", "--json")
    assert (code, err) == (0, "")
    answer = orjson.loads(out)
    newest = assert_covers_every_event(cli_env)
    assert answer == {
        "number": 1,
        "tree_size": newest.tree_size,
        "root": newest.root,
        "last_notification_id": newest.last_notification_id,
        "written": 1,
    }
    code, out, err = run(capsys, "checkpoint")
    assert (code, err) == (0, "")
    assert out == (
        f"checkpoint 1 (already covers every event): {newest.tree_size} events,"
        f" root {newest.root}\n"
    )
    assert len(chain(cli_env)) == 1

    code, pem, err = run(capsys, "checkpoint", "public-key")
    assert (code, err) == (0, "")
    public = serialization.load_pem_public_key(pem.encode())
    assert isinstance(public, Ed25519PublicKey)
    for signed in chain(cli_env):
        exported = signed.exported()
        signature = base64.b64decode(exported["signature"])
        public.verify(signature, signed.checkpoint.signed_bytes())  # raises if it does not hold
