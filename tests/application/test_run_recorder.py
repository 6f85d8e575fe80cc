"""The Python API for outside emitters: start, emit, complete; one transaction, on both stores."""

from __future__ import annotations

import pytest
from support.ledger_fixtures import RawTable
from support.sample_job import job_ids

from domain.events import (
    JobCompleted,
    ModelCallEnvelope,
    RunStarted,
    StageTransition,
    hash_of,
)
from infrastructure.application.ledger import Ledger
from infrastructure.application.run_recorder import RunRecorder


def model_call(call_id: str) -> ModelCallEnvelope:
    return ModelCallEnvelope(
        call_id=call_id,
        model_id="m",
        model_version="2026-01",
        prompt_bundle_hash=hash_of("bundle"),
        temperature=0,
        prompt="question",
        response="answer",
    )


def test_a_run_is_recorded_whole_when_completed(ledger: Ledger, raw_table: RawTable) -> None:
    ids = ledger.snapshots.default_ids()
    before = raw_table.execute("SELECT COUNT(*) FROM {table}")
    recorder = RunRecorder(
        ledger.runs, RunStarted(seed=7, input="hi", snapshot_ids=ids, capture_mode="full_io")
    )
    recorder.emit(StageTransition(to_stage="plan"))
    recorder.emit(model_call("c1"))
    assert raw_table.execute("SELECT COUNT(*) FROM {table}") == before  # nothing yet
    log = recorder.complete("answer")
    assert log.completion is not None
    assert (log.completion.replayable, log.completion.missing_artifacts) == (True, [])
    assert log.sealed
    types = [entry["event_type"] for entry in ledger.jobs.stream(log.job_id)]
    assert types == [
        "JobStarted",
        "StageTransition",
        "ModelCallEnvelope",
        "JobCompleted",
        "JobSealed",
    ]
    assert job_ids(ledger) == [log.job_id]


def test_a_completed_run_takes_nothing_more(ledger: Ledger) -> None:
    recorder = RunRecorder(ledger.runs, RunStarted(seed=7, input="hi"))
    log = recorder.complete("done")
    with pytest.raises(ValueError, match=f"run {log.job_id} is complete"):
        recorder.emit(StageTransition(to_stage="late"))
    with pytest.raises(ValueError, match="already complete"):
        recorder.complete("again")


def test_the_ledgers_own_events_cannot_be_emitted(ledger: Ledger) -> None:
    recorder = RunRecorder(ledger.runs, RunStarted(seed=7, input="hi"))
    verdict = JobCompleted(
        final_output="x", replayable=True, missing_artifacts=[], selfrep=None, brainstate=None
    )
    with pytest.raises(TypeError, match="JobCompleted cannot be emitted within a run"):
        recorder.emit(verdict)
    with pytest.raises(TypeError, match="RunStarted cannot be emitted"):
        recorder.emit(RunStarted(seed=1, input="nested"))
