"""``MACE_ENV=production`` without ``MACE_CHECKPOINT_KEY``, on SQLite and PostgreSQL: every command
that opens a store, and ``mace serve``, refuses in one line (exit 2) and writes nothing; no
development key is made in its place."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.ledger_fixtures import MACE_MAIN, RawTable, run, settings_for, subprocess_env

from infrastructure.application.ledger import Ledger
from infrastructure.application.tokens import add_token

REFUSAL = (
    "mace: INVALID_INPUT: MACE_ENV=production requires MACE_CHECKPOINT_KEY"
    " (the path of an Ed25519 private key, PEM)\n"
)
COMMANDS = [
    ["init"],
    ["sem", "put", "world/country/spain/capital", '"Madrid"'],
    ["run", "2 + 3", "--seed", "s1"],
    ["checkpoint"],
    ["checkpoint", "public-key"],
    ["verify", "--all"],
    ["sem", "get", "world/country/france/capital"],
    ["jobs"],
    ["rebuild"],
]


def stored_rows(table: RawTable) -> int:
    ((count,),) = table.execute("SELECT count(*) FROM {table}")
    return int(count)


@pytest.fixture
def production(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RawTable:
    """A store with events in it, then the production environment without a checkpoint key."""
    settings = settings_for(store_url)
    with Ledger.open(settings) as ledger:
        ledger.sem.put("world/country/france/capital", "Paris")
    for name, value in subprocess_env(store_url, MACE_ENV="production").items():
        if name.startswith("MACE_"):
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("MACE_CHECKPOINT_KEY")
    return RawTable(settings)


def files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_command_refuses_without_the_checkpoint_key_and_writes_nothing(
    production: RawTable, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    rows, before = stored_rows(production), files(tmp_path)
    assert run(capsys, *argv) == (2, "", REFUSAL)
    assert (stored_rows(production), files(tmp_path)) == (rows, before)


def test_a_new_store_is_not_even_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in subprocess_env(f"sqlite:///{tmp_path}/new.db").items():
        if name.startswith("MACE_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("MACE_ENV", "production")
    monkeypatch.delenv("MACE_CHECKPOINT_KEY")
    assert run(capsys, "init") == (2, "", REFUSAL)
    assert files(tmp_path) == []


def test_the_service_does_not_start_without_the_checkpoint_key(
    production: RawTable, store_url: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    add_token(tokens, "ana", ["auditor"], "acme")
    env = subprocess_env(store_url, MACE_ENV="production", MACE_TOKENS_FILE=str(tokens))
    del env["MACE_CHECKPOINT_KEY"]
    rows, before = stored_rows(production), files(tmp_path)
    # A bound on a broken test only: a service that started would never exit by itself.
    served = subprocess.run(
        [sys.executable, "-c", MACE_MAIN, "serve", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (served.returncode, served.stdout, served.stderr) == (2, "", REFUSAL)
    assert (stored_rows(production), files(tmp_path)) == (rows, before)
