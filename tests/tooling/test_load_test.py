"""``mace loadtest``: a tiny real load (service process, clients, store) and its read-back.

The load test's figures are never asserted (timings belong in benchmarks); what is asserted is
what it verifies: every acknowledged run stored exactly once, every replay ok (authoritative only
for a run of nothing but its Stage-0 iteration: a tool's result is the emitter's word),
and that it refuses what it cannot measure. The read-back itself is shown to find what is wrong.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.ledger_fixtures import run
from support.sample_job import job_ids

from domain.canonical import canonical_json
from domain.events import INGEST_LINE, RunCompleted, RunStarted
from domain.governance import Actor
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from infrastructure.tooling.load_server import TENANT
from infrastructure.tooling.load_verify import verify_store
from infrastructure.tooling.load_workload import PlannedRun, Workload, plan_runs
from infrastructure.tooling.loadtest_command import render

TINY = ("--clients", "2", "--runs", "4", "--events", "7", "--replays", "1", "--timeout", "120")


def test_a_tiny_load_is_stored_exactly_and_replays_ok(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    sqlite = cli_env.store.startswith("sqlite")
    flags = ("--allow-sqlite",) if sqlite else ()
    code, out, err = run(capsys, "loadtest", *TINY, *flags, "--json")
    report = orjson.loads(out)
    assert (code, err) == (0, ""), report
    assert out.encode() == canonical_json(report) + b"\n"
    assert report["ok"] is True
    assert report["store"] == cli_env.parsed_store().describe()
    assert (report["errors"], report["wrong_answers"], report["timed_out"]) == ({}, 0, False)
    # 4 runs: open, 2 batches, 1 re-sent batch, complete; 1 replay.
    assert report["requests"] == 4 * 5 + 1
    counts = {kind: row["count"] for kind, row in report["latency_ms"].items()}
    assert counts == {"open": 4, "batch": 12, "complete": 4, "replay": 1}
    assert (report["runs_completed"], report["replays_completed"]) == (4, 1)
    assert report["verification"] == {
        "runs_planned": 4,
        "runs_acknowledged": 4,
        "runs_verified": 4,
        "abandoned_runs_absent": 0,
        "abandoned_runs_recorded_exactly": 0,
        "events_sent": 28,
        "events_found": 28,
        "replays_answered": 1,
        "replays_verified": 1,
        "problem_count": 0,
        "problems": [],
        "ok": True,
    }
    lines = render(report).splitlines()
    assert lines[-1] == "OK"
    assert (
        "read back: 4/4 acknowledged runs sealed with exactly the events sent (28/28 events),"
        " 1/1 answered replays ok, authoritative where no fact is taken as recorded"
    ) in lines
    # Independently of the report: the store holds the 4 jobs, all of the load test's tenant.
    with Ledger.open(cli_env) as ledger:
        jobs = [job for job in job_ids(ledger, TENANT) if job.startswith("load-")]
        assert len(jobs) == 4
        assert {ledger.jobs.get(job, tenant=TENANT).tenant for job in jobs} == {TENANT}
        assert not any(ledger.jobs.exists(job) for job in jobs)


def test_a_sqlite_store_is_refused_without_allow_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "mace.db"
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{store}")
    code, out, err = run(capsys, "loadtest", *TINY)
    assert (code, out) == (2, "")
    assert err == (
        f"mace: INVALID_INPUT: MACE_STORE is sqlite:///{store}: mace loadtest measures a postgresql://"
        " store (pass --allow-sqlite for a quick local try)\n"
    )
    assert not store.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--clients", "0"), "--clients 0: expected at least 1"),
        (("--batches", "1"), "--batches 1: expected at least 2"),
        (
            ("--events", "3"),
            "--events 3: expected at least 4 (the 4-event Stage-0 iteration, one event per batch)",
        ),
        (("--runs", "4", "--replays", "5"), "--replays 5: expected 0 to --runs (4)"),
        (("--timeout", "0"), "--timeout 0: expected a positive number of seconds"),
    ],
)
def test_an_impossible_workload_is_refused_before_anything_starts(
    args: tuple[str, ...],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path / "mace.db"
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{store}")
    code, out, err = run(capsys, "loadtest", "--allow-sqlite", *args)
    assert (code, out, err) == (2, "", f"mace: INVALID_INPUT: {message}\n")
    assert not store.exists()


# --- the read-back finds what is wrong ----------------------------------------------------------


def record(ledger: Ledger, planned: PlannedRun, drop_last: bool = False) -> None:
    """Record a planned run as the service would, optionally without its last event."""
    items = [i for body in planned.batch_bodies for i in orjson.loads(body)["events"]]
    events = [INGEST_LINE.validate_python(item["event"]) for item in items]
    ledger.runs.record(
        RunStarted.model_validate(orjson.loads(planned.open_body)),
        events[:-1] if drop_last else events,
        RunCompleted(final_output=planned.final_output),
        TENANT,
    )


def test_the_read_back_finds_missing_runs_events_and_replays(ledger: Ledger) -> None:
    runs = plan_runs(Workload(runs=4, events=6, replays=1), "t", ledger.snapshots.default_ids())
    exact, short, missing, _abandoned = runs
    record(ledger, exact)
    record(ledger, short, drop_last=True)
    auditor = Actor.of("a", ["auditor"])
    attempt = ledger.replays.run(exact.run_id, ReplayMode.AUDIT, auditor, tenant=TENANT)
    assert (attempt.attempt, attempt.outcome.ok, attempt.outcome.authoritative) == (1, True, False)
    acknowledged = {exact.run_id, short.run_id, missing.run_id}

    result = verify_store(ledger, runs, acknowledged, {exact.run_id: 1}, TENANT)
    assert result.as_json() == {
        "runs_planned": 4,
        "runs_acknowledged": 3,
        "runs_verified": 1,
        "abandoned_runs_absent": 1,
        "abandoned_runs_recorded_exactly": 0,
        "events_sent": 18,
        "events_found": 11,
        "replays_answered": 1,
        "replays_verified": 1,
        "problem_count": 2,
        "problems": [
            f"run {short.run_id}: 5 events stored, 6 sent",
            f"run {missing.run_id}: not recorded",
        ],
        "ok": False,
    }

    wrong_attempt = verify_store(ledger, [exact], {exact.run_id}, {exact.run_id: 2}, TENANT)
    assert wrong_attempt.problems == [
        f"replay of {exact.run_id}: recorded attempt 1, the service answered 2"
    ]
    other_tenant = verify_store(ledger, [exact], {exact.run_id}, {}, "someone-else")
    # Another tenant's job of that id is not that tenant's: to it, the run was never recorded.
    assert other_tenant.problems == [f"run {exact.run_id}: not recorded"]
    assert verify_store(ledger, [exact], {exact.run_id}, {exact.run_id: 1}, TENANT).ok


def test_a_run_of_its_stage0_iteration_alone_replays_authoritatively(ledger: Ledger) -> None:
    (planned,) = plan_runs(
        Workload(runs=1, events=4, replays=1), "s", ledger.snapshots.default_ids()
    )
    record(ledger, planned)
    auditor = Actor.of("a", ["auditor"])
    attempt = ledger.replays.run(planned.run_id, ReplayMode.AUDIT, auditor, tenant=TENANT)
    assert (attempt.outcome.ok, attempt.outcome.authoritative, planned.authoritative) == (
        True,
        True,
        True,
    )
    assert verify_store(ledger, [planned], {planned.run_id}, {planned.run_id: 1}, TENANT).ok
