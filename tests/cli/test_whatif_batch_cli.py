"""``mace audit --with KEY=ID`` on SQLite and PostgreSQL, in one or two workers: the totals line,
exit 1 when a job changes, 0 when ``--expect`` lists that change, canonical JSON per job then the
totals (the same with two workers), and one line, exit 2, nothing written for a bad ``--with``,
``--jobs`` or ``--expect``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli_output import assert_usage_error, json_lines
from support.ledger_fixtures import run
from support.replay_cli import act, new_job, written_state
from support.store_copies import fingerprint

from domain.snapshot import Snapshot, SnapshotKind
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import default_snapshots
from infrastructure.storage.settings import Settings

ID = "ab" * 32


def addition_only_router(settings: Settings) -> str:
    payload: dict[str, Any] = default_snapshots()[SnapshotKind.ROUTER].payload
    rules = [
        {**rule, "pattern": r"^\s*\d+\s*[+]\s*\d+\s*$"} if rule["rule_id"] == "R1" else rule
        for rule in payload["rules"]
    ]
    with Ledger.open(settings) as ledger:
        return ledger.snapshots.put(Snapshot.declare("router", {"rules": rules}))[0].snapshot_id


def test_a_changed_job_fails_the_gate_until_it_is_expected(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    new_job(capsys, "2 + 3")
    product = new_job(capsys, "4 * 5")
    act(monkeypatch, "aude", "auditor")
    router = addition_only_router(cli_env)

    code, out, err = run(capsys, "audit", "--with", f"router={router}")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith("what-if over recorded jobs: CHANGED, NON-AUTHORITATIVE; under")
    assert lines[1].startswith(
        f"  job {product}: CHANGED (UNEXPECTED) first at iteration 0, field router_decision:"
    )
    assert lines[-2] == (
        f"2 jobs: 1 unchanged, 1 changed (first at job {product}, iteration 0,"
        " field router_decision), 0 failed"
    )
    assert lines[-1].startswith("recorded: what-if batch record ")

    expect = tmp_path / "expect.jsonl"
    expect.write_text(f'{{"job_id": "{product}", "field": "router_decision"}}\n')
    code, out, err = run(
        capsys, "audit", "--with", f"router={router}", "--expect", str(expect), "--json"
    )
    assert (code, err) == (0, "")
    *jobs, totals = json_lines(out)
    assert [row["verdict"] for row in jobs] == ["unchanged", "changed"]
    assert jobs[1]["first_change"]["expected"] is True
    assert (totals["verdict"], totals["authoritative"]) == ("expected", False)
    assert totals["totals"] == {
        "jobs": 2,
        "unchanged": 1,
        "changed": 1,
        "unexpected": 0,
        "failed": 0,
        "open": 0,
    }
    # Two workers (processes, each the jobs of its range of streams): the same rows and totals.
    code, out, err = run(
        capsys,
        "audit",
        "--with",
        f"router={router}",
        "--expect",
        str(expect),
        "--json",
        "--workers",
        "2",
    )
    assert (code, err) == (0, "")
    *split_jobs, split_totals = json_lines(out)
    assert split_jobs == jobs
    assert split_totals["totals"] == totals["totals"]


@pytest.mark.parametrize(
    ("argv", "files", "message"),
    [
        (["--with", f"model={ID}"], {}, f"--with model={ID}: unknown key 'model'"),
        (["--with", "router=12"], {}, "--with router=12: expected a router snapshot id"),
        (["--until", "3"], {}, "--until selects jobs for a what-if: it goes with --with KEY=ID"),
        (["--with", f"router={ID}", "--jobs", "jobs"], {"jobs": "ok\nnot ok\n"}, "jobs line 2:"),
        (["--with", f"router={ID}", "--jobs", "missing"], {}, "cannot read missing"),
        (
            ["--with", f"router={ID}", "--expect", "expect"],
            {"expect": '[{"job_id": "a"}]'},
            'expect entry 0: expected {"job_id": ID, "field": FIELD}',
        ),
        (
            ["--with", f"router={ID}", "--jobs", "jobs", "--since", "1"],
            {"jobs": "a\n"},
            "--jobs names the jobs itself: it takes no --since or --until",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    files: dict[str, str],
    message: str,
) -> None:
    new_job(capsys)
    act(monkeypatch, "aude", "auditor")
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "audit", *argv)
    assert_usage_error(code, out, err, message)
    assert written_state(cli_env, capsys) == before


def test_the_batch_reads_the_read_store_and_records_on_the_primary(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store_copy: Callable[[], str],
) -> None:
    """As ``mace audit`` reads: the jobs from ``MACE_READ_STORE`` (named, with its head), the
    record written to ``MACE_STORE``; a job recorded after the copy is not in the batch."""
    first = new_job(capsys, "2 + 3")
    product = new_job(capsys, "4 * 5")
    router = addition_only_router(cli_env)
    replica = store_copy()
    new_job(capsys, "6 * 7")  # on the primary only
    act(monkeypatch, "aude", "auditor")
    monkeypatch.setenv("MACE_READ_STORE", replica)
    before = fingerprint(replica)
    code, out, err = run(capsys, "audit", "--with", f"router={router}", "--json")
    assert (code, err) == (1, "")
    *jobs, totals = json_lines(out)
    assert [row["job_id"] for row in jobs] == [first, product]
    assert totals["read_store"]["head"] == totals["selection"]["until"]
    assert fingerprint(replica) == before
    with Ledger.open(cli_env, create=False) as primary:
        assert primary.whatif.get(totals["record_id"]).report["jobs"] == jobs
