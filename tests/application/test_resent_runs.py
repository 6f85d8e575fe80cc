"""The same run content sent twice is recognised as a duplicate and nothing new is written.

``mace ingest`` of one file twice (no ``job_id``) records one job and then answers it as a
duplicate; over HTTP, a batch re-sent after its run completed is answered as duplicates, while
an event id re-used for other content stays 409. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error, stage_event
from support.ledger_fixtures import RawTable, run, store_of

from domain.errors import ConflictError, ErrorCode, IntegrityFailure
from domain.events import RunStarted, StageTransition
from domain.job import Job
from domain.run_content import RunContent, run_content_digest
from domain.run_file import parse_run
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

LINES: list[dict[str, Any]] = [
    {"type": "RunStarted", "seed": "ing-1", "input": "say hello", "capture_mode": "full_io"},
    {"type": "StageTransition", "to_stage": "answer"},
    {"type": "RunCompleted", "final_output": "hi there"},
]


def run_file(tmp_path: Path, lines: list[dict[str, Any]], name: str = "run.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def position(settings: Settings) -> int:
    with Ledger.open(settings) as ledger:
        return store_of(ledger).recorder.max_notification_id() or 0


def ingest_json(capsys: pytest.CaptureFixture[str], path: str) -> dict[str, Any]:
    code, out, err = run(capsys, "ingest", path, "--json")
    assert (code, err) == (0, ""), err
    answer: dict[str, Any] = orjson.loads(out)
    return answer


def test_ingesting_the_same_file_twice_records_one_job(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run_file(tmp_path, LINES)
    first = ingest_json(capsys, path)
    assert first["duplicate"] is False
    before = position(cli_env)

    again = ingest_json(capsys, path)
    assert again == {**first, "duplicate": True}
    code, out, err = run(capsys, "ingest", path)
    assert (code, err) == (0, "")
    said = f"job {first['job_id']}: this run was recorded before (same content); nothing written"
    assert out.splitlines()[0] == said
    assert position(cli_env) == before
    code, out, _ = run(capsys, "jobs", "--json")
    assert [job["job_id"] for job in orjson.loads(out)["jobs"]] == [first["job_id"]]

    # Other content is another run: one changed field is enough.
    other = [LINES[0], LINES[1], {"type": "RunCompleted", "final_output": "hi again"}]
    changed = ingest_json(capsys, run_file(tmp_path, other, "other.jsonl"))
    assert changed["duplicate"] is False
    assert changed["job_id"] != first["job_id"]


def test_a_file_with_its_own_job_id_sent_twice_is_a_duplicate_not_a_conflict(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run_file(tmp_path, [{**LINES[0], "job_id": "ext-7"}, *LINES[1:]])
    first = ingest_json(capsys, path)
    assert (first["job_id"], first["duplicate"]) == ("ext-7", False)
    assert ingest_json(capsys, path) == {**first, "duplicate": True}


def test_the_same_content_in_another_tenant_is_its_own_run(ledger: Ledger) -> None:
    parsed = parse_run(orjson.dumps(line) for line in LINES)
    mine, duplicate = ledger.run_imports.record_once(parsed, "acme")
    assert duplicate is False
    theirs, duplicate = ledger.run_imports.record_once(parsed, "beta")
    assert duplicate is False
    # The same derived id (each tenant's first job of that seed and input), two jobs.
    assert theirs.job_id == mine.job_id
    assert (
        ledger.jobs.get(mine.job_id, tenant="acme").id
        != ledger.jobs.get(theirs.job_id, tenant="beta").id
    )
    assert ledger.run_imports.record_once(parsed, "beta")[0].job_id == theirs.job_id


CHECKPOINTED = pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpointed", "not"])
NAMED = pytest.mark.parametrize("job_id", [None, "ext-7"], ids=["derived", "named"])


def checkpointed_store(ledger: Ledger, checkpointed: bool) -> None:
    """The store as a CLI write leaves it (checkpointed), or as one never checkpointed."""
    if checkpointed:
        ledger.run_imports.record_once(parse_run(orjson.dumps(line) for line in OTHER))
        ledger.checkpoints.write()


OTHER: list[dict[str, Any]] = [
    {"type": "RunStarted", "seed": "ing-2", "input": "say goodbye"},
    {"type": "RunCompleted", "final_output": "bye"},
]


def lines_with(job_id: str | None) -> list[dict[str, Any]]:
    return LINES if job_id is None else [{**LINES[0], "job_id": job_id}, *LINES[1:]]


@CHECKPOINTED
@NAMED
def test_two_identical_runs_sent_at_once_record_one_job(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool, job_id: str | None
) -> None:
    """The other run commits while this one is about to: this one's write conflicts on the
    content index (and a named id on the job's stream), and it answers the other's job,
    writing nothing."""
    checkpointed_store(ledger, checkpointed)
    parsed = parse_run(orjson.dumps(line) for line in lines_with(job_id))
    commit = ledger.jobs.commit
    others: list[tuple[Any, bool]] = []

    def the_other_commits_first(*args: Any, **kwargs: Any) -> Any:
        if not others:
            others.append((None, False))
            others[0] = ledger.run_imports.record_once(parsed)
            before.append(store_of(ledger).recorder.max_notification_id())
        return commit(*args, **kwargs)

    before: list[int | None] = []
    monkeypatch.setattr(ledger.jobs, "commit", the_other_commits_first)
    second, duplicate = ledger.run_imports.record_once(parsed)
    ((first, first_duplicate),) = others
    assert (first_duplicate, duplicate) == (False, True)
    assert second.job_id == first.job_id
    assert store_of(ledger).recorder.max_notification_id() == before[0]


@CHECKPOINTED
@NAMED
def test_a_run_sent_again_answers_its_job_and_writes_nothing(
    ledger: Ledger, checkpointed: bool, job_id: str | None
) -> None:
    checkpointed_store(ledger, checkpointed)
    parsed = parse_run(orjson.dumps(line) for line in lines_with(job_id))
    first, _ = ledger.run_imports.record_once(parsed)
    before = store_of(ledger).recorder.max_notification_id()
    again, duplicate = ledger.run_imports.record_once(parsed)
    assert (again.job_id, duplicate) == (first.job_id, True)
    assert store_of(ledger).recorder.max_notification_id() == before


@NAMED
def test_a_content_index_deleted_below_a_checkpoint_fails_closed_and_writes_nothing(
    ledger: Ledger, raw_table: RawTable, job_id: str | None
) -> None:
    """Deleting the index would let the same run be recorded as a second job: the index's
    head, proven against the newest checkpoint before the write, says it was there."""
    parsed = parse_run(orjson.dumps(line) for line in lines_with(job_id))
    ledger.run_imports.record_once(parsed)
    ledger.checkpoints.write()
    content = run_content_digest(parsed.started, parsed.events, parsed.completed)
    raw_table.delete(RunContent.id_for(RunContent.named("default", content)), 1)
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(IntegrityFailure) as failed:
        ledger.run_imports.record_once(parsed)
    assert failed.value.code == ErrorCode.INTEGRITY_FAILURE
    assert "truncated below checkpoint" in str(failed.value)
    assert store_of(ledger).recorder.max_notification_id() == before


@CHECKPOINTED
def test_a_tenants_job_from_before_ids_were_scoped_keeps_its_id_taken(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """acme's job lies under its id alone, where no key of a new acme stream reaches: a run
    named by that id is refused for acme, and recorded for beta (another tenant's id is free)."""
    with monkeypatch.context() as before_scoping:
        before_scoping.setattr(Job, "name_of", classmethod(lambda cls, fields: fields["job_id"]))
        before_scoping.setattr(Job, "scoped_id", property(lambda job: job.job_id))
        ledger.jobs.run("2 + 3", "s1", job_id="legacy", tenant="acme")
    checkpointed_store(ledger, checkpointed)
    parsed = parse_run(orjson.dumps(line) for line in lines_with("legacy"))
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(ConflictError, match="job legacy already exists"):
        ledger.run_imports.record_once(parsed, "acme")
    assert store_of(ledger).recorder.max_notification_id() == before
    recorded, duplicate = ledger.run_imports.record_once(parsed, "beta")
    assert (recorded.job_id, duplicate) == ("legacy", False)


def test_a_batch_that_lands_while_a_run_completes_is_never_lost(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The completion read the run's job, then a batch was appended to it before the completion
    committed: the completion's write conflicts with the batch's, and the completion is made
    again over the job as it now stands, every event in it, each once."""
    started = RunStarted(seed="race-1", input="say hello", capture_mode="full_io")
    draft, _ = ledger.run_uploads.open(started, "default")
    first = [("e1", StageTransition(to_stage="plan"))]
    late = [("e2", StageTransition(to_stage="answer"))]
    ledger.run_uploads.append(draft.run_id, "default", first)
    read = ledger.jobs.with_macs
    landed: list[bool] = []

    def a_batch_lands_first(*args: Any, **kwargs: Any) -> Any:
        held = read(*args, **kwargs)
        if not landed:
            landed.append(True)
            ledger.run_uploads.append(draft.run_id, "default", late)
        return held

    monkeypatch.setattr(ledger.jobs, "with_macs", a_batch_lands_first)
    log, sent = ledger.run_uploads.complete(draft.run_id, "default", "hi")
    assert (landed, sent) == ([True], 2)
    recorded = [entry["event_type"] for entry in ledger.jobs.stream(log.job_id)]
    assert recorded == [
        "JobStarted",
        "StageTransition",
        "StageTransition",
        "JobCompleted",
        "JobSealed",
    ]


# --- over HTTP ----------------------------------------------------------------------------------


def test_a_batch_resent_after_completion_is_answered_as_duplicates(api: Api) -> None:
    start = {"type": "RunStarted", "seed": 7, "input": "say hello"}
    run_id = api.open_run(start)
    batch = [stage_event("e1", "plan"), stage_event("e2", "act")]
    assert api.send(run_id, batch).status_code == 200
    done = api.post(f"/v1/runs/{run_id}/complete", {"final_output": "ok"})
    assert done.status_code == 200
    before = api.position()

    again = api.send(run_id, batch)
    assert again.status_code == 200, again.content
    assert again.json() == {"run_id": run_id, "accepted": 0, "duplicates": 2, "events": 2}
    assert api.send(run_id, batch[1:]).json()["duplicates"] == 1
    reopened = api.post("/v1/runs", start)
    assert reopened.status_code == 201
    assert reopened.json() == {"run_id": run_id, "status": "completed", "events": 2}
    completed = api.post(f"/v1/runs/{run_id}/complete", {"final_output": "ok"})
    assert (completed.status_code, completed.content) == (200, done.content)
    assert api.position() == before

    assert_error(
        api.send(run_id, [stage_event("e1", "other")]),
        409,
        "CONFLICT",
        "events[0].event_id 'e1' was sent before with other content",
    )
    assert_error(
        api.send(run_id, [*batch, stage_event("e3")]),
        409,
        "CONFLICT",
        f"run {run_id} is complete: no more events may be added",
    )
    assert api.position() == before
