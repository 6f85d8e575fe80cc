"""A Stage-0 job pays each guarantee once (issue 29 point 1), on SQLite and PostgreSQL: counted,
never timed, so that a redundant pass that comes back fails here.

One job (8 events: its start, five facts, its completion and its seal): the runtime runs once when
the privacy policy refuses nothing (twice only to mask a refused value); the snapshots it runs
under are parsed once a process (their ids are their contents' digests); BrainState is folded
over the job's facts once, by the run, and its completion takes the run's facts as built; each
fact's payload is written canonically once, and its record stores those bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from support.ledger_fixtures import RawTable

import infrastructure.application.snapshots as snapshots_module
import projections.reflective_log as reflective_log
import projections.stage0_runtime as runtime
from domain.canonical import Written, canonical_json
from domain.events import RunEvent
from domain.job import CaptureMode, Job
from domain.snapshot import Snapshot
from domain.stage0.config import DEFAULT_ROUTER
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.signed_record import unverified_body

SECRET = "hunter2"
FULL_IO = CaptureMode.FULL_IO


def counted(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[None]:
    """Every call of ``owner.name`` from now on, counted (one entry a call)."""
    inner: Callable[..., Any] = getattr(owner, name)
    calls: list[None] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        return inner(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def test_the_runtime_runs_once_unless_a_value_is_refused(
    ledger: Ledger, raw_table: RawTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = counted(monkeypatch, runtime, "run_iteration")
    ledger.jobs.run("what is 2 + 3", "s1", job_id="plain")
    assert len(runs) == 1

    runs.clear()
    log = ledger.jobs.run(f"remember my password is {SECRET}", "s1", job_id="refused")
    assert len(runs) == 2  # the caller's input, then the masked one that is recorded
    assert SECRET not in log.job_input
    assert SECRET.encode() not in raw_table.every_byte()


def test_snapshots_are_parsed_once_a_process_not_once_a_job(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = DEFAULT_ROUTER.model_dump()["rules"]
    router, _ = ledger.snapshots.put(Snapshot.declare("router", {"rules": rules[::-1]}))
    named = {"router": router.snapshot_id}
    ledger.jobs.run("what is 2 + 3", "s1", job_id="first")
    ledger.jobs.run("what is 2 + 3", "s1", job_id="first-named", snapshot_ids=named)
    parses = [
        counted(monkeypatch, runtime, "parse_config"),
        counted(monkeypatch, snapshots_module, "parse_config"),
    ]
    ledger.jobs.run("what is 3 + 4", "s2", job_id="second")
    ledger.jobs.run("what is 3 + 4", "s2", job_id="second-named", snapshot_ids=named)
    assert [len(calls) for calls in parses] == [0, 0]


def test_brainstate_is_folded_over_a_jobs_facts_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.jobs.run("what is 2 + 3", "s1", job_id="first")
    folds: list[int] = []
    for module in (runtime, reflective_log):
        fold = module.fold_brainstate

        def counting(config: Any, events: Any, seed: Any, fold: Any = fold) -> Any:
            events = list(events)
            folds.append(len(events))
            return fold(config, events, seed)

        monkeypatch.setattr(module, "fold_brainstate", counting)
    for mode in (None, CaptureMode.FULL_IO, CaptureMode.NONE):
        folds.clear()
        log = ledger.jobs.run("what is 3 + 4", "s2", capture_mode=mode)
        # The run's state before its one iteration (over no facts yet), and after it (over
        # its facts but the trace, which brings nothing to mind): once over the job's facts.
        assert folds == [0, 3], mode
        completion = log.completion
        assert completion is not None and completion.brainstate is not None
        recorded = ledger.jobs.reflective_log(log.job_id).completion
        assert recorded is not None and recorded.brainstate == completion.brainstate


def test_each_fact_is_written_once_and_stored_as_those_bytes(
    ledger: Ledger, raw_table: RawTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.jobs.run("what is 2 + 3", "s1", job_id="first")
    kept_fields = Job.Recorded.kept_fields
    stored: list[str] = []

    def storing(event: Job.Recorded) -> dict[str, Written]:
        kept = kept_fields(event)
        stored.append(f"{event.event_type} {'kept' if 'payload' in kept else 'written again'}")
        return kept

    monkeypatch.setattr(Job.Recorded, "kept_fields", storing)
    writes = counted(monkeypatch, RunEvent, "_written")
    log = ledger.jobs.run("what is 3 + 4", "s2", job_id="second", capture_mode=FULL_IO)
    assert len(writes) == 5  # when each fact is made: its check, and its bytes
    facts = ("InputReceived", "RouterDecision", "AgentOutput", "IterationTrace", "JobCompleted")
    assert stored == [f"{name} kept" for name in facts]
    # The bytes kept are the bytes the payload reads back as, in the record as stored.
    for version, _, state in raw_table.rows(Job.id_for(log.job_id)):
        body = orjson.loads(unverified_body(state))
        assert canonical_json(body) == unverified_body(state), version
