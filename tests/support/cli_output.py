"""What ``mace`` prints: canonical JSON lines, one-line errors, and what a store holds."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
import psycopg
import pytest

from domain.canonical import canonical_json
from infrastructure.application.errors import ANSWERS, EXIT_USAGE
from infrastructure.storage.settings import Settings, SQLiteStore
from projections.replay import NOT_REPRODUCED, NOT_REPRODUCED_WHY
from support.ledger_fixtures import RawTable, run

USAGE_CODES = {code for code, answer in ANSWERS.items() if answer.exit_code == EXIT_USAGE}
NOT_REPRODUCED_LINE = f"mace: {NOT_REPRODUCED}: {NOT_REPRODUCED_WHY}\n"
"""What ``mace replay`` says on standard error (exit 1) of a replay that ran to its end
re-executing nothing: ok means reproduced."""


def canonical_line(line: str) -> dict[str, Any]:
    """One line of canonical JSON (sorted keys, no whitespace), parsed."""
    assert line.endswith("\n") and line.count("\n") == 1
    data = orjson.loads(line)
    assert isinstance(data, dict)
    assert canonical_json(data).decode() == line[:-1]
    return data


def json_lines(out: str) -> list[dict[str, Any]]:
    return [canonical_line(line + "\n") for line in out.splitlines()]


def listed_jobs(out: str) -> list[dict[str, Any]]:
    """The jobs of what ``mace jobs --json`` printed: one canonical document, ``{"jobs",
    "total"}``."""
    jobs: list[dict[str, Any]] = canonical_line(out)["jobs"]
    return jobs


def event_count(settings: Settings) -> int:
    """Rows in the event table; 0 when the store or its table does not exist yet."""
    store = settings.parsed_store()
    if isinstance(store, SQLiteStore) and not store.path.exists():
        return 0
    try:
        rows = RawTable(settings).execute("SELECT COUNT(*) FROM {table}")
    except (sqlite3.OperationalError, psycopg.errors.UndefinedTable):
        return 0
    return int(rows[0][0])


def assert_usage_error(code: int, out: str, err: str, message: str) -> None:
    """Exit 2, nothing on stdout, one error line on stderr that holds ``message``: the code of
    bad usage or input (or of a thing the input names that is not there), as a line or, for a
    command given ``--json``, as its JSON error."""
    assert code == 2
    assert out == ""
    if err.startswith("{"):
        error = json_error(err)
        error_code, text = error["code"], error["message"]
    else:
        assert err.count("\n") == 1, err
        error_code, _, text = err.removeprefix("mace: ").partition(": ")
    assert error_code in USAGE_CODES, err
    assert message in text, err


def json_error(err: str) -> dict[str, str]:
    """The one line a command given ``--json`` prints on stderr when it fails: its error."""
    body = canonical_line(err)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    error: dict[str, str] = body["error"]
    return error


def json_error_as_line(err: str) -> str:
    """What a command given ``--json`` printed on failure, as it prints it without ``--json``."""
    error = json_error(err)
    return f"mace: {error['code']}: {error['message']}\n"


def assert_failure_line(err: str, code: str, message: str | None = None) -> None:
    """Exactly one stderr line, ``mace: <CODE>: <message>``."""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"mace: {code}: "), err
    if message is not None:
        assert err == f"mace: {code}: {message}\n"


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``mace *argv`` succeeded with nothing on standard error: its standard output."""
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    return out


def failed(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``mace *argv`` exited 1 with nothing on standard output: its standard error."""
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, ""), (code, out, err)
    return err
