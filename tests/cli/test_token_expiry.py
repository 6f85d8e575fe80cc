"""``mace token new --expires-in|--expires-at [--json]`` and ``mace token list`` with expiry.

The tokens file is the service's, not the store's: these commands never open a ledger.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from support.ledger_fixtures import run

from domain.canonical import canonical_json
from infrastructure.application.tokens import TokenBook, add_token, token_id_of


@pytest.fixture
def tokens_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("MACE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/never-opened.db")
    path = tmp_path / "tokens.json"
    monkeypatch.setenv("MACE_TOKENS_FILE", str(path))
    return path


def test_a_new_token_expires_when_asked_and_says_so_in_json(
    tokens_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    code, out, err = run(
        capsys, "token", "new", "--actor", "olga", "--roles", "operator", "--tenant", "acme",
        "--expires-in", "30d", "--json",
    )  # fmt: skip
    after = datetime.now(UTC)
    assert (code, err) == (0, "")
    answer = orjson.loads(out)
    assert out.encode() == canonical_json(answer) + b"\n"
    token = answer["token"]
    expires = datetime.fromisoformat(answer["expires_at"])
    assert before + timedelta(days=30) <= expires <= after + timedelta(days=30)
    assert answer == {
        "token": token,
        "id": token_id_of(token),
        "actor_id": "olga",
        "roles": ["operator"],
        "tenant": "acme",
        "expires_at": answer["expires_at"],
    }
    assert answer["expires_at"].endswith("Z")
    holder = TokenBook.load(tokens_file).holder(token)
    assert holder is not None and holder.expires_at == expires

    code, out, _ = run(
        capsys, "token", "new", "--actor", "ana", "--roles", "auditor",
        "--expires-at", "2031-01-02T03:04:05+01:00",
    )  # fmt: skip
    holder = TokenBook.load(tokens_file).holder(out.strip())
    assert code == 0 and holder is not None
    assert holder.expires_at == datetime(2031, 1, 2, 2, 4, 5, tzinfo=UTC)

    code, out, _ = run(capsys, "token", "new", "--actor", "gus", "--roles", "operator", "--json")
    assert code == 0 and orjson.loads(out)["expires_at"] is None


def test_token_list_shows_when_each_token_expires(
    tokens_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ana = add_token(tokens_file, "ana", ["auditor"], "acme", datetime(2031, 1, 2, tzinfo=UTC))
    olga = add_token(tokens_file, "olga", ["operator"], "default")
    code, out, err = run(capsys, "token", "list")
    assert (code, err) == (0, "")
    assert out == (
        f"{token_id_of(ana)} ana auditor acme expires 2031-01-02T00:00:00Z\n"
        f"{token_id_of(olga)} olga operator default never expires\n"
    )
    code, out, _ = run(capsys, "token", "list", "--json")
    rows = orjson.loads(out)["tokens"]
    assert [row["expires_at"] for row in rows] == ["2031-01-02T00:00:00Z", None]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--expires-in", "30"], "--expires-in '30': expected a whole number and a unit"),
        (["--expires-in", "0d"], "--expires-in '0d': expected a duration above zero"),
        (["--expires-in=-1d"], "--expires-in '-1d': expected a whole number and a unit"),
        (["--expires-at", "2031-01-02"], "--expires-at '2031-01-02': expected an ISO-8601 instant"),
        (["--expires-at", "tomorrow"], "--expires-at 'tomorrow': expected an ISO-8601 instant"),
        (["--expires-at", "2001-01-02T00:00:00Z"], "--expires-at '2001-01-02T00:00:00Z': already"),
    ],
)
def test_a_bad_expiry_is_refused_in_one_line_and_nothing_is_written(
    tokens_file: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    add_token(tokens_file, "olga", ["operator"], "acme")
    before = tokens_file.read_bytes()
    code, out, err = run(capsys, "token", "new", "--actor", "x", "--roles", "admin", *argv)
    assert (code, out) == (2, "")
    assert err.startswith("mace: INVALID_INPUT: " + message) and err.count("\n") == 1, err
    assert tokens_file.read_bytes() == before


def test_expires_in_and_expires_at_are_one_or_the_other(
    tokens_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--expires-in", "1d", "--expires-at", "2031-01-02T00:00:00Z"]
    code, out, err = run(capsys, "token", "new", "--actor", "x", "--roles", "admin", *argv)
    assert (code, out) == (2, "") and "not allowed with argument" in err
    assert not tokens_file.exists()
