"""Acting, recording and replaying through ``mace`` in tests of replay and governance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from infrastructure.application.snapshots import default_snapshots
from infrastructure.storage.settings import Settings
from support.cli_output import canonical_line, event_count, json_lines, ok
from support.ledger_fixtures import run
from support.misrouted_run import misrouted_run

DEFAULT_IDS = {kind.value: s.snapshot_id for kind, s in default_snapshots().items()}


ROUTER_ID = DEFAULT_IDS["router"]


REPLAY_ROLES_TEXT = "['admin', 'auditor', 'operator']"


RIGHT_DECISION = {
    "agent": "math_agent",
    "fallback": None,
    "rule_id": "R1",
    "why": "matched_R1_math",
}


REPORT_KEYS = {
    "job_id",
    "mode",
    "ok",
    "error_code",
    "authoritative",
    "divergences",
    "steps",
    "actor",
    "attempt",
}


def act(monkeypatch: pytest.MonkeyPatch, actor: str, roles: str) -> None:
    """The identity the next ``mace`` commands act as."""
    monkeypatch.setenv("MACE_ACTOR", actor)
    monkeypatch.setenv("MACE_ROLES", roles)


def new_job(
    capsys: pytest.CaptureFixture[str],
    text: str = "2 + 3",
    seed: str = "s1",
    capture: str | None = None,
) -> str:
    """``mace run TEXT --seed SEED``: the new job's id. ``capture`` is its ``--capture`` mode
    when given (``full_io`` for a job a production replay must reproduce), else the default."""
    argv = ("--capture", capture) if capture is not None else ()
    code, out, err = run(capsys, "run", text, "--seed", seed, *argv, "--json")
    assert (code, err) == (0, ""), err
    job_id = canonical_line(out)["job_id"]
    assert isinstance(job_id, str)
    return job_id


def council_rejection(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """A job whose force-continue was approved, then rejected: its id."""
    job_id = new_job(capsys)
    act(monkeypatch, "adm", "admin")
    ok(capsys, "governance", "request", job_id, "--action", "force_continue", "--reason", "why")
    act(monkeypatch, "cou", "council")
    ok(capsys, "governance", "approve", job_id, "--action", "force_continue")
    ok(capsys, "governance", "reject", job_id, "--action", "force_continue")
    return job_id


def replay_json(
    capsys: pytest.CaptureFixture[str], job_id: str, *extra: str
) -> tuple[int, dict[str, Any], str]:
    """``mace replay JOB_ID *extra --json``: exit code, the (canonical) report, stderr."""
    code, out, err = run(capsys, "replay", job_id, *extra, "--json")
    report = canonical_line(out)
    assert set(report) >= REPORT_KEYS
    if code == 0:
        assert err == ""
    return code, report, err


def governance_log(capsys: pytest.CaptureFixture[str], job_id: str | None = None) -> list[Any]:
    argv = ["governance", "log", *([job_id] if job_id else []), "--json"]
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    return json_lines(out)


def replay_entries(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in log if e["event"] in {"REPLAY_REQUEST", "REPLAY_RESULT"}]


def written_state(settings: Settings, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[Any]]:
    """Everything a command could have written: the row count and the whole governance log."""
    return event_count(settings), governance_log(capsys)


def write_run_file(tmp_path: Path, lines: list[dict[str, Any]], name: str = "run.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def diverging_run(capsys: pytest.CaptureFixture[str], real_job: str) -> list[dict[str, Any]]:
    """The real job's run as JSON lines, its router decision changed to one R1 would never give."""
    code, out, _ = run(capsys, "events", real_job, "--json")
    assert code == 0
    lines = misrouted_run(json_lines(out), "diverged-1")
    assert lines[0]["snapshot_ids"] == DEFAULT_IDS
    return lines
