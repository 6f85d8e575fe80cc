"""Capture modes as seed 003 says: ``prompts_only`` unless asked otherwise, on every way in, but
``full_io`` by default for a Stage-0 job that changes SEM (seed 000 section 12), and a bundle
that would carry model or tool content out of the ledger only when someone says so.
On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.api_support import Api
from support.cli_output import assert_failure_line, assert_usage_error
from support.hand_written_runs import math_iteration, run_file, with_brainstates
from support.ledger_fixtures import run

from domain.capture import CaptureWhy
from domain.governance import Actor
from domain.job import CaptureMode
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings


def job_of(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    code, out, err = run(capsys, "run", "2 + 3", "--seed", "cap", "--json", *extra)
    assert (code, err) == (0, "")
    answer = orjson.loads(out)
    assert isinstance(answer, dict)
    return answer


def test_mace_run_keeps_prompts_only_unless_asked_and_production_replay_says_why_it_cannot(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = job_of(capsys)
    assert (job["capture_mode"], job["replayable"]) == ("prompts_only", False)
    code, out, _ = run(capsys, "events", str(job["job_id"]), "--json")
    entries = [orjson.loads(line) for line in out.splitlines()]
    output = next(e for e in entries if e["event_type"] == "AgentOutput")
    assert output["payload"]["response"] is None
    assert output["payload"]["response_hash"] is not None

    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin,auditor")
    code, _, err = run(capsys, "replay", str(job["job_id"]), "--mode", "production")
    assert code == 1
    assert_failure_line(
        err,
        "MISSING_PERSISTED_AGENT_OUTPUT",
        "iteration 0 agent math_agent (event 2): response not persisted: capture mode"
        " prompts_only stores the hash of response only",
    )
    code, out, _ = run(capsys, "replay", str(job["job_id"]))
    assert code == 0
    assert out.startswith("verdict: REPRODUCED, authoritative; of 7 facts: 6 re-executed and")

    full = job_of(capsys, "--capture", "full_io", "--job-id", "full")
    assert (full["capture_mode"], full["replayable"]) == ("full_io", True)


def test_http_jobs_and_ingested_runs_keep_prompts_only_unless_asked(
    api: Api, tmp_path: Path
) -> None:
    job_id = api.new_job()
    assert api.get(f"/v1/jobs/{job_id}").json()["capture_mode"] == "prompts_only"
    asked = api.new_job(seed="s2", capture_mode="full_io")
    assert api.get(f"/v1/jobs/{asked}").json()["capture_mode"] == "full_io"
    run_id = api.open_run({"seed": "r1", "input": "look it up"})
    response = api.post(f"/v1/runs/{run_id}/complete", {"final_output": "done"})
    assert response.status_code == 200, response.content
    ingested = response.json()["job_id"]
    assert api.get(f"/v1/jobs/{ingested}").json()["capture_mode"] == "prompts_only"


def test_export_of_a_job_that_kept_responses_needs_redact_or_include_full_io(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plain = job_of(capsys)
    bundle = tmp_path / "plain.json"
    assert run(capsys, "export", str(plain["job_id"]), "-o", str(bundle))[0] == 0

    full = str(job_of(capsys, "--capture", "full_io", "--job-id", "full")["job_id"])
    refused = tmp_path / "refused.json"
    code, out, err = run(capsys, "export", full, "-o", str(refused))
    assert_usage_error(
        code,
        out,
        err,
        "job full keeps model or tool content (event 2 AgentOutput.response, event 3"
        " IterationTrace.agent_outputs): export it with --redact to leave that out, or with"
        " --include-full-io to include it",
    )
    assert not refused.exists()
    code, out, err = run(capsys, "export-test", full, "-o", str(tmp_path / "regression"))
    assert code == 2 and "--include-full-io" in err
    assert not (tmp_path / "regression").exists() or not any((tmp_path / "regression").iterdir())

    code, out, _ = run(capsys, "export", full, "-o", str(refused), "--include-full-io")
    assert code == 0 and b"2 + 3 = 5" in refused.read_bytes()
    redacted = tmp_path / "redacted.json"
    code, out, _ = run(capsys, "export", full, "-o", str(redacted), "--redact")
    assert code == 0
    assert b"2 + 3 = 5" not in redacted.read_bytes()
    assert "payload.response" in out and "payload.final_output" in out


def test_a_prompts_only_run_keeps_no_response_in_its_trace_either(
    auditor: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # The trace repeats each agent output: a response left there was stored, and exported
    # without --include-full-io, from a job that says it kept prompts only.
    ids = auditor
    canary = "CANARY-TRACE-RESPONSE"
    lines = math_iteration(0, "2 + 3", 5)
    trace = lines[-1]
    trace["agent_outputs"][0]["response"] = {**trace["agent_outputs"][0]["response"]}
    trace["agent_outputs"][0]["response"]["text"] = canary
    for line in lines:
        if line["type"] == "AgentOutput":
            line["response"] = None
    path = run_file(tmp_path, "leaky", ids, with_brainstates(lines), "2 + 3 = 5", "prompts_only")
    assert run(capsys, "ingest", path)[0] == 0
    code, out, _ = run(capsys, "events", "leaky", "--type", "IterationTrace", "--json")
    assert code == 0
    assert orjson.loads(out)["payload"]["agent_outputs"][0]["response"] is None
    bundle = tmp_path / "leaky.json"
    assert run(capsys, "export", "leaky", "-o", str(bundle))[0] == 0
    assert canary.encode() not in bundle.read_bytes()
    code, out, _ = run(capsys, "replay", "leaky", "--json")
    assert (code, orjson.loads(out)["reproduced"]) == (0, True)


def test_a_trace_entry_with_a_field_no_agent_output_has_is_refused(
    auditor: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # Content under a name capture and redaction do not know would be kept and exported.
    ids = auditor
    lines = math_iteration(0, "2 + 3", 5)
    lines[-1]["agent_outputs"][0]["output"] = "CANARY-TRACE-OUTPUT"
    path = run_file(tmp_path, "unknown", ids, with_brainstates(lines), "2 + 3 = 5", "prompts_only")
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    assert_failure_line(
        err,
        "INVALID_INPUT",
        f"{path} line 5: agent_outputs[0]: no field 'output' (an output has agent, error, prompt,"
        " request_hash, response, response_hash, status)",
    )


SEM_WRITING = "my favorite color is blue"
ADMIN_AUDITOR = Actor.of("ana", ["admin", "auditor"])


def test_a_job_that_writes_sem_keeps_its_outputs_by_default_and_replays_in_production(
    ledger: Ledger,
) -> None:
    """Seed 000 section 12: by default, external outputs are persisted for any job that changes
    SEM. The choice is made from what the job did, and the job records the mode it used."""
    log = ledger.jobs.run(SEM_WRITING, "s1")
    assert (log.capture_mode, log.capture_why) == ("full_io", CaptureWhy.CHANGES_SEM)
    assert log.completion is not None and log.completion.replayable is True
    report = ledger.replays.run(log.job_id, ReplayMode.PRODUCTION, ADMIN_AUDITOR).report
    assert (report["ok"], report["error_code"], report["authoritative"]) == (True, None, True)

    reading = ledger.jobs.run("what is my favorite color", "s1")
    assert (reading.capture_mode, reading.capture_why) == ("prompts_only", CaptureWhy.DEFAULT)
    asked = ledger.jobs.run(SEM_WRITING, "s2", capture_mode=CaptureMode.PROMPTS_ONLY)
    assert (asked.capture_mode, asked.capture_why) == ("prompts_only", CaptureWhy.ASKED)
    assert asked.completion is not None and asked.completion.replayable is False


def test_a_job_left_to_the_default_stores_the_bytes_the_mode_it_got_stores_when_asked(
    ledger: Ledger,
) -> None:
    """The default runs the job in full_io and drops what its mode does not keep: a job that
    changes no SEM is stored exactly as one asked for prompts_only (and as before the rule)."""
    chosen = ledger.jobs.run("2 + 3", "s1", job_id="chosen")
    asked = ledger.jobs.run("2 + 3", "s1", job_id="asked", capture_mode=CaptureMode.PROMPTS_ONLY)
    assert chosen.capture_mode == asked.capture_mode == "prompts_only"
    # Past the start (its job id) and before the seal (its digest), the facts are the same.
    assert [e["payload"] for e in ledger.jobs.stream("chosen")][1:-1] == [
        e["payload"] for e in ledger.jobs.stream("asked")
    ][1:-1]


def test_mace_run_says_which_capture_it_chose_and_why_and_production_replay_runs(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "run", SEM_WRITING, "--seed", "s1", "--job-id", "fav")
    assert (code, err) == (0, "")
    assert (
        "  capture: full_io (the default for a job that changes SEM, seed 000 section 12: its"
        " external outputs are kept)\n"
    ) in out
    assert "  replayable: yes\n" in out
    answer = orjson.loads(run(capsys, "run", SEM_WRITING, "--seed", "s2", "--json")[1])
    assert (answer["capture_mode"], answer["capture_why"]) == ("full_io", "changes_sem")
    plain = job_of(capsys)
    assert (plain["capture_mode"], plain["capture_why"]) == ("prompts_only", "default")
    asked = job_of(capsys, "--capture", "none", "--job-id", "none")
    assert (asked["capture_mode"], asked["capture_why"]) == ("none", "asked")

    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin,auditor")
    code, out, err = run(capsys, "replay", "fav", "--mode", "production")
    assert (code, err) == (0, "")
    assert out.startswith("verdict: REPRODUCED, authoritative")


def test_http_jobs_that_write_sem_keep_their_outputs_unless_asked(api: Api) -> None:
    chosen = api.post("/v1/jobs", {"input": SEM_WRITING, "seed": "s1"})
    assert chosen.status_code == 201, chosen.content
    body = chosen.json()
    assert (body["capture_mode"], body["capture_why"], body["replayable"]) == (
        "full_io",
        "changes_sem",
        True,
    )
    asked = api.post("/v1/jobs", {"input": SEM_WRITING, "seed": "s2", "capture_mode": "none"})
    assert (asked.json()["capture_mode"], asked.json()["capture_why"]) == ("none", "asked")
