"""The Python API for outside emitters: start, emit, complete; each event stored as it is
emitted, the job recorded sealed in one transaction at completion, on both stores."""

from __future__ import annotations

import pytest
from support.ledger_fixtures import RawTable
from support.sample_job import job_ids

from domain.events import (
    JobCompleted,
    ModelCallEnvelope,
    RetrievalRequest,
    RunStarted,
    StageTransition,
    hash_of,
)
from domain.job import DEFAULT_TENANT
from infrastructure.application.ledger import Ledger
from infrastructure.application.run_recorder import RunRecorder
from projections.job_search import JobQuery


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


def test_a_run_is_written_as_it_goes_to_its_open_job_and_sealed_when_completed(
    ledger: Ledger,
) -> None:
    ids = ledger.snapshots.default_ids()
    recorder = RunRecorder(
        ledger.run_uploads,
        RunStarted(seed=7, input="hi", snapshot_ids=ids, capture_mode="full_io"),
    )
    recorder.emit(StageTransition(to_stage="plan"))
    recorder.emit(model_call("c1"))
    (open_run,) = ledger.read_models.open_runs("default")  # stored as emitted, to its job
    assert (open_run["run_id"], open_run["events"]) == (recorder.run_id, 2)
    (open_job,) = ledger.read_models.jobs(JobQuery(DEFAULT_TENANT))["jobs"]
    assert open_job["status"] == "open"
    log = recorder.complete("answer")
    assert ledger.read_models.open_runs("default") == []
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
    assert job_ids(ledger) == [log.job_id] == [open_job["job_id"]]


def test_a_completed_run_takes_nothing_more(ledger: Ledger) -> None:
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed=7, input="hi"))
    log = recorder.complete("done")
    with pytest.raises(ValueError, match=f"run {log.job_id} is complete"):
        recorder.emit(StageTransition(to_stage="late"))
    with pytest.raises(ValueError, match="already complete"):
        recorder.complete("again")


def test_the_ledgers_own_events_cannot_be_emitted(ledger: Ledger) -> None:
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed=7, input="hi"))
    verdict = JobCompleted(
        final_output="x", replayable=True, missing_artifacts=[], selfrep=None, brainstate=None
    )
    with pytest.raises(TypeError, match="JobCompleted cannot be emitted within a run"):
        recorder.emit(verdict)
    with pytest.raises(TypeError, match="RunStarted cannot be emitted"):
        recorder.emit(RunStarted(seed=1, input="nested"))


def test_an_event_that_skipped_its_validators_is_refused_when_emitted(
    ledger: Ledger, raw_table: RawTable
) -> None:
    # model_copy skips validation: a query emptied beside the hash of another query would be
    # stored as if a redacted copy, and its request_hash never checked.
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed=7, input="look it up"))
    before = raw_table.execute("SELECT COUNT(*) FROM {table}")
    request = RetrievalRequest(request_id="r1", query="secret query")
    with pytest.raises(ValueError, match="request_hash does not match the sha256"):
        recorder.emit(request.model_copy(update={"query": ""}))
    assert raw_table.execute("SELECT COUNT(*) FROM {table}") == before
