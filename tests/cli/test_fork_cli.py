"""``mace fork JOB --at ITERATION`` on SQLite and PostgreSQL, in process: exit 0 with the fork
recorded and shown as a diff against the original, which a plain ``mace replay`` of the fork
reproduces; 2 with one line and nothing written for the same fork again, a bad ``--at`` or a
job a fork cannot decide again; 1 for an original that does not verify."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_output import assert_usage_error, canonical_line
from support.hand_written_runs import math_iteration, run_file, with_brainstates
from support.ledger_fixtures import RawTable, run
from support.replay_cli import act, new_job, written_state
from test_whatif_cli import stored_router

from domain.job import Job
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings


def test_a_fork_is_recorded_shown_as_a_diff_and_replays_to_itself(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "aude", "auditor")
    code, out, err = run(capsys, "fork", job_id, "--at", "0", "--input", "4 * 5")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"fork: CHANGED, NON-AUTHORITATIVE; job {job_id} from iteration 0")
    assert lines[1].startswith("  recorded as job fork-")
    assert "  then: job, field final_answer:" in lines
    assert '    fork:     "4 * 5 = 20"' in lines
    assert lines[-1].startswith("recorded: fork record ")
    fork_id = lines[1].split()[3].rstrip(":")
    code, out, err = run(capsys, "replay", fork_id, "--json")
    report = canonical_line(out)
    assert (code, report["ok"], report["authoritative"]) == (0, True, False)

    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "fork", job_id, "--at", "0", "--input", "4 * 5", "--json")
    assert_usage_error(code, out, err, f"as job {fork_id}: a fork is recorded once")
    assert '"CONFLICT"' in err
    code, out, err = run(capsys, "fork", job_id, "--at", "1")
    assert_usage_error(code, out, err, f"--at 1: job {job_id} recorded iterations 0 to 0")
    code, out, err = run(capsys, "fork", job_id, "--at", "x")
    assert code == 2
    assert written_state(cli_env, capsys) == before


def test_a_tampered_original_exits_1(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "aude", "auditor")
    table = RawTable(cli_env)
    stream = Job.id_for(job_id)
    table.set_column(stream, 2, "state", table.state(stream, 2).replace(b"2 + 3", b"2 + 4"))
    code, out, err = run(capsys, "fork", job_id, "--at", "0", "--input", "4 * 5")
    assert (code, out) == (1, "")
    assert err.startswith("mace: INTEGRITY_FAILURE: ")


def test_a_forks_bundle_carries_what_its_kept_iterations_ran_under(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "aude", "auditor")
    with Ledger.open(cli_env) as ledger:
        ids = ledger.snapshots.default_ids()
    two = with_brainstates([*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 20)])
    assert run(capsys, "ingest", run_file(tmp_path, "two", ids, two, "4 * 5 = 20"))[0] == 0
    no_math = stored_router(cli_env, r"^never$", None)
    argv = ("--at", "1", "--with", f"router={no_math}", "--json")
    code, out, err = run(capsys, "fork", "two", *argv)
    assert (code, err) == (0, "")
    fork_id = canonical_line(out)["fork_job_id"]
    bundle = tmp_path / "fork.bundle"
    code, out, err = run(capsys, "export", fork_id, "-o", str(bundle), "--include-full-io")
    assert code == 0, err
    code, out, err = run(capsys, "replay", "--bundle", str(bundle), "--json")
    report = canonical_line(out.splitlines(keepends=True)[0])
    assert (code, report["ok"], report["authoritative"]) == (0, True, False), report["steps"]
    # An audit of the whole store replays the fork as any job, every fact re-executed and
    # matched, and counts it apart from the authoritative ones, saying why.
    code, out, err = run(capsys, "audit")
    assert code == 0, out + err
    shown = next(line for line in out.splitlines() if line.startswith(f"job {fork_id}: "))
    assert "a fork of job two: its iterations before 1 are that job's" in shown
    assert "11 re-executed and matched" in shown
