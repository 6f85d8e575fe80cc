"""``mace replay JOB --with KEY=ID`` on SQLite and PostgreSQL, in process: exit 0 when no
decision changes, 1 when one does (the first change named, then the rest), 2 with one line and
nothing written for a bad ``--with``."""

from __future__ import annotations

from typing import Any

import pytest
from support.cli_output import assert_usage_error, canonical_line
from support.ledger_fixtures import run
from support.replay_cli import act, new_job, written_state

from domain.snapshot import Snapshot, SnapshotKind
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import default_snapshots
from infrastructure.storage.settings import Settings

ID = "ab" * 32


def stored_router(settings: Settings, math_pattern: str | None, namespace: str | None) -> str:
    payload: dict[str, Any] = default_snapshots()[SnapshotKind.ROUTER].payload
    rules = [
        {**rule, "pattern": math_pattern} if math_pattern and rule["rule_id"] == "R1" else rule
        for rule in payload["rules"]
    ]
    with Ledger.open(settings) as ledger:
        declared = Snapshot.declare("router", {"rules": rules}, seed_namespace=namespace)
        return ledger.snapshots.put(declared)[0].snapshot_id


def test_unchanged_exits_0_and_a_changed_route_exits_1_naming_the_first_change(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "aude", "auditor")
    same = stored_router(cli_env, None, "router-copy")
    code, out, err = run(capsys, "replay", job_id, "--with", f"router={same}", "--json")
    answer = canonical_line(out)
    assert (code, err, answer["verdict"], answer["authoritative"]) == (0, "", "unchanged", False)
    assert answer["changes"] == {"router": same}

    no_math = stored_router(cli_env, r"^never$", None)
    code, out, err = run(capsys, "replay", job_id, "--with", f"router={no_math}")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith("what-if: CHANGED, NON-AUTHORITATIVE; job ")
    assert lines[2] == "  first change: iteration 0, field router_decision:"
    assert "  then: iteration 0, field selected_agents:" in lines
    assert lines[-1].startswith("recorded: what-if record ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--with", f"model={ID}"], f"--with model={ID}: unknown key 'model'"),
        (["--with", "router=12"], "--with router=12: expected a router snapshot id"),
        (["--with", f"router={ID}", "--with", f"router={ID}"], "--with router is given twice"),
        (["--with", f"policy={ID}", "--mode", "production"], "it takes no --mode"),
        (["--with", f"policy={ID}", "--force-continue"], "it takes no --force-continue"),
    ],
)
def test_a_bad_with_exits_2_and_writes_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "aude", "auditor")
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "replay", job_id, *argv)
    assert_usage_error(code, out, err, message)
    assert written_state(cli_env, capsys) == before
