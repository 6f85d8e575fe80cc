"""Personal data in any field of any event: refused at every way in, never shown to a non-admin.

The attack: canaries (a password under its key name and after ``password:``, a US SSN, a card
number, an ``sk-`` API key, a PEM private key header, a bearer token; `support.canaries`) planted
in every field kind of a run (tool arguments and results, model prompts and responses, an agent's
error, retrieval queries and hits, an error message, a SEM value, the input and the answer), sent
through ``mace ingest``, the HTTP batches and the Python `RunRecorder`; then the job is read as a
non-admin (``mace events``, ``GET /v1/jobs/{id}/events``, the dashboard) and searched for every
canary. Every way in refuses the run (exit 2 / 422 ``INVALID_INPUT`` / `ClearPrivateValue`) in
one line that names the event and field and quotes no canary, and writes nothing. A store written
before the rules (and a Stage-0 job's own input) may still hold them in clear: a non-admin read
shows none, an admin's shows them and is logged. On SQLite and PostgreSQL, CLI stores checkpointed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error, stage_event
from support.canaries import CANARIES, PASSWORD, SSN, TEXT, event_lines, found, run_lines
from support.ledger_fixtures import RawTable, run, store_of

from domain.events import INGEST_LINE, RunCompleted, RunStarted, hash_of
from domain.run_file import parse_run
from infrastructure.application.ledger import Ledger
from infrastructure.application.privacy_rules import ClearPrivateValue
from infrastructure.application.run_recorder import RunRecorder
from infrastructure.storage.settings import Settings

FIELD_KINDS = [line["type"] for line in event_lines()]
ASKED_BEFORE: dict[str, list[dict[str, Any]]] = {
    "ToolResult": [
        {
            "type": "ToolCall",
            "call_id": "c1",
            "tool": "crm_lookup",
            "tool_schema_hash": hash_of("crm_lookup schema"),
            "request_hash": hash_of("kept elsewhere"),
        }
    ],
    "RetrievalResponse": [{"type": "RetrievalRequest", "request_id": "r1", "query": "find it"}],
}
"""A clean question before each kind of answer: a run file refuses an answer to nothing."""


def run_file(tmp_path: Path, lines: list[dict[str, Any]]) -> str:
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def record_before_the_rules(
    ledger: Ledger, lines: list[dict[str, Any]], tenant: str = "default"
) -> str:
    """Record a run as a store written before the rules holds it (the use case the ways in
    share, below their checks), and return its job id."""
    parsed = parse_run(orjson.dumps(line) for line in lines)
    return ledger.runs.record(parsed.started, parsed.events, parsed.completed, tenant).job_id


def assert_one_clean_line(message: str) -> None:
    assert "\n" not in message.rstrip("\n")
    assert found(message) == {}, f"the refusal quotes a canary: {message}"


def test_mace_ingest_refuses_a_run_with_canaries_and_writes_nothing(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "run", "2 + 2", "--seed", "s0")[0] == 0  # checkpointed, as CLI writes are
    before = RawTable(cli_env).every_byte()
    path = run_file(tmp_path, run_lines())
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, ""), err
    assert err.startswith(f"mace: INVALID_INPUT: {path}: RunStarted.input holds what looks like")
    assert "privacy rules never let the ledger keep in clear" in err
    assert_one_clean_line(err)
    assert RawTable(cli_env).every_byte() == before
    code, out, _ = run(capsys, "jobs", "--json")
    assert code == 0 and found(out) == {}


def test_http_refuses_canaries_in_the_start_a_batch_and_the_completion(
    api: Api, settings: Settings
) -> None:
    before = api.position()
    started = run_lines()[0]
    response = api.post("/v1/runs", started)
    assert_one_clean_line(assert_error(response, 422, "INVALID_INPUT", field="body.input"))
    assert api.position() == before

    run_id = api.open_run({**started, "input": "look the customer up"})
    opened = api.position()
    batch = [{"event_id": f"e{n}", "event": line} for n, line in enumerate(event_lines())]
    response = api.send(run_id, batch)
    message = assert_error(response, 422, "INVALID_INPUT", field="body.events.0.event")
    assert_one_clean_line(message)
    assert api.position() == opened

    response = api.post(f"/v1/runs/{run_id}/complete", {"final_output": TEXT})
    message = assert_error(response, 422, "INVALID_INPUT", field="body.final_output")
    assert_one_clean_line(message)
    assert api.position() == opened
    assert found(RawTable(settings).every_byte()) == {}


def one_kind(kind: str) -> dict[str, Any]:
    (line,) = [line for line in event_lines() if line["type"] == kind]
    return line


@pytest.mark.parametrize("kind", FIELD_KINDS)
def test_ingest_refuses_canaries_in_each_field_kind(
    ledger: Ledger, raw_table: RawTable, kind: str
) -> None:
    start = {"type": "RunStarted", "seed": "r", "input": "help", "capture_mode": "full_io"}
    asked = ASKED_BEFORE.get(kind, [])  # an answer follows its question in a run file
    end = {"type": "RunCompleted", "final_output": "done"}
    parsed = parse_run(orjson.dumps(line) for line in [start, *asked, one_kind(kind), end])
    with pytest.raises(ClearPrivateValue) as refused:
        ledger.run_imports.record_once(parsed)
    assert refused.value.position == len(asked)
    assert re.match(rf"^{kind}\.\S+ ", str(refused.value)), str(refused.value)
    assert_one_clean_line(str(refused.value))
    assert found(raw_table.every_byte()) == {}


@pytest.mark.parametrize("kind", FIELD_KINDS)
def test_an_http_batch_with_canaries_in_each_field_kind_is_422(
    api: Api, settings: Settings, kind: str
) -> None:
    run_id = api.open_run({"type": "RunStarted", "seed": 7, "input": "help"})
    before = api.position()
    batch = [stage_event("e1"), {"event_id": "e2", "event": one_kind(kind)}]
    response = api.send(run_id, batch)
    message = assert_error(response, 422, "INVALID_INPUT", field="body.events.1.event")
    assert message.startswith(f"{kind}.")
    assert_one_clean_line(message)
    assert api.position() == before
    assert found(RawTable(settings).every_byte()) == {}


@pytest.mark.parametrize("kind", FIELD_KINDS)
def test_the_recorder_refuses_canaries_in_each_field_kind(
    ledger: Ledger, raw_table: RawTable, kind: str
) -> None:
    event = INGEST_LINE.validate_python(one_kind(kind))
    recorder = RunRecorder(
        ledger.run_uploads, RunStarted(seed="r", input="help", capture_mode="full_io")
    )
    with pytest.raises(ClearPrivateValue) as refused:
        recorder.emit(event)
        recorder.complete("done")
    assert re.match(rf"^{kind}\.\S+ ", str(refused.value)), str(refused.value)
    assert_one_clean_line(str(refused.value))
    assert found(raw_table.every_byte()) == {}


def test_the_recorder_refuses_canaries_in_the_input_and_the_answer(
    ledger: Ledger, raw_table: RawTable
) -> None:
    with pytest.raises(ClearPrivateValue, match=r"^RunStarted\.input "):
        RunRecorder(ledger.run_uploads, RunStarted(seed="r", input=f"my ssn is {SSN}"))
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed="r", input="help"))
    with pytest.raises(ClearPrivateValue, match=r"^RunCompleted\.final_output\.password "):
        recorder.complete({"password": PASSWORD})
    assert found(raw_table.every_byte()) == {}
    assert recorder.complete("done").job_id  # nothing was recorded by the refused completion


def test_a_job_stored_before_the_rules_shows_no_canary_to_a_non_admin_cli_reader(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(cli_env) as ledger:  # closed checkpointed, as every CLI write leaves it
        job_id = record_before_the_rules(ledger, run_lines())
    with Ledger.open(cli_env) as ledger:
        position = store_of(ledger).recorder.max_notification_id()
    for roles in (None, "operator,auditor"):
        if roles is not None:
            monkeypatch.setenv("MACE_ACTOR", "olga")
            monkeypatch.setenv("MACE_ROLES", roles)
        for extra in ((), ("--json",)):
            code, out, err = run(capsys, "events", job_id, *extra)
            assert code == 0, err
            assert found(out + err) == {}
            assert "redacted: only admin reads it in full" in err
    with Ledger.open(cli_env) as ledger:
        assert store_of(ledger).recorder.max_notification_id() == position
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin")
    code, out, err = run(capsys, "events", job_id, "--json")
    assert code == 0, err
    assert set(found(out)) == set(CANARIES)
    assert "your read of personal data" in err and "was recorded" in err


def test_a_job_stored_before_the_rules_shows_no_canary_over_http_or_the_dashboard(
    api: Api,
) -> None:
    job_id = record_before_the_rules(api.ledger, run_lines(), "acme")
    response = api.get(f"/v1/jobs/{job_id}/events", "operator")
    assert response.status_code == 200, response.content
    assert found(response.content) == {}
    assert response.json()["personal_data"]["redacted"] is True
    assert found(api.get(f"/v1/jobs/{job_id}", "auditor").content) == {}
    with api.unchecked():
        page = api.get(f"/dashboard/jobs/{job_id}", "operator")
        assert page.status_code == 200
        assert found(page.content) == {}
    response = api.get(f"/v1/jobs/{job_id}/events", "admin")
    assert set(found(response.content)) == set(CANARIES)


def test_a_stage0_jobs_input_with_personal_data_is_redacted_for_a_non_admin(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    sensitive = f"my ssn is {SSN} and my card 4111 1111 1111 1111"
    code, out, err = run(capsys, "run", sensitive, "--seed", "s1", "--json")
    assert code == 0, err
    job_id = orjson.loads(out)["job_id"]
    code, out, err = run(capsys, "events", job_id, "--json")
    assert code == 0, err
    assert found(out) == {} and "redacted" in err


def test_a_recorded_run_keeps_ordinary_content_and_counts(ledger: Ledger) -> None:
    # What only looks like a rule's word is kept: token counts, a passwordless setting, a
    # timestamp, a phone number, a digest.
    answer = {
        "usage": {"prompt_tokens": 12, "max_tokens": 400},
        "passwordless": True,
        "at": "2026-11-27T09:00:00Z",
        "call": "555-123-4567",
        "digest": "4111111111111111" + "a" * 48,
    }
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed="r", input="count the tokens"))
    log = recorder.complete(answer)
    completed = [e for e in ledger.jobs.stream(log.job_id) if e["event_type"] == "JobCompleted"]
    assert completed[0]["payload"]["final_output"] == answer
    assert RunCompleted(final_output=answer).final_output == answer
