"""The same run content sent twice is recognised as a duplicate and nothing new is written.

``mace ingest`` of one file twice (no ``job_id``) records one job and then answers it as a
duplicate; over HTTP, a batch re-sent after its run completed is answered as duplicates, while
an event id re-used for other content stays 409. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest
from support.api_support import Api, assert_error, stage_event
from support.ledger_fixtures import run, store_of

from domain.events import RunStarted, StageTransition
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


def test_a_duplicate_found_only_inside_the_write_attempt_answers_the_first_job(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two identical runs sent at once: the second looked before the first committed."""
    parsed = parse_run(orjson.dumps(line) for line in LINES)
    content = run_content_digest(parsed.started, parsed.events, parsed.completed)
    index = RunContent.id_for(RunContent.named("default", content))
    first, _ = ledger.run_imports.record_once(parsed)
    before = store_of(ledger).recorder.max_notification_id()
    exists = store_of(ledger).stream_exists
    looked: list[UUID] = []

    def looked_before_the_first_committed(stream: UUID) -> bool:
        if stream == index and not looked:
            looked.append(stream)
            return False
        return exists(stream)

    monkeypatch.setattr(store_of(ledger), "stream_exists", looked_before_the_first_committed)
    second, duplicate = ledger.run_imports.record_once(parsed)
    assert looked == [index]
    assert (second.job_id, duplicate) == (first.job_id, True)
    assert store_of(ledger).recorder.max_notification_id() == before


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
