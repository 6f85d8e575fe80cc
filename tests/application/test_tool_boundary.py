"""The tool boundary (seed 002), on SQLite and PostgreSQL, with run files written by hand from
Run Event Schema v1: a tool call's request hash is the hash of its arguments, each result
answers a call made before it in the run, once, and a call no result answers leaves the job
unreplayable in production, naming what is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error, stage_event
from support.cli_output import NOT_REPRODUCED_LINE, assert_failure_line
from support.ledger_fixtures import run, store_of

from domain.events import hash_of
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

SCHEMA = hash_of({"tool": "search"})
ARGUMENTS = {"q": "capital of france"}
RESULT = {"hits": ["paris"]}


def call(call_id: str = "c1", **overrides: Any) -> dict[str, Any]:
    return {
        "type": "ToolCall",
        "call_id": call_id,
        "tool": "search",
        "tool_schema_hash": SCHEMA,
        "arguments": ARGUMENTS,
        "request_hash": hash_of(ARGUMENTS),
        **overrides,
    }


def result(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "ToolResult", "call_id": call_id, "status": "ok", "result": RESULT}


def run_file(
    tmp_path: Path,
    events: list[dict[str, Any]],
    job_id: str = "tools-1",
    snapshot_ids: dict[str, str] | None = None,
) -> str:
    started = {"job_id": job_id, "seed": "t-1", "input": "look it up"}
    lines = [
        {"type": "RunStarted", **started, "snapshot_ids": snapshot_ids or {}},
        *events,
        {"type": "RunCompleted", "final_output": "paris"},
    ]
    path = tmp_path / f"{job_id}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def position(settings: Settings) -> int:
    with Ledger.open(settings) as ledger:
        return store_of(ledger).recorder.max_notification_id() or 0


REFUSED = {
    "request hash of zeros": (
        [call(request_hash="0" * 64), result()],
        "line 2: request_hash does not match the sha256 of the canonical JSON of arguments",
    ),
    "result for an unknown call": (
        [call(), result("c2")],
        "line 3: ToolResult answers call_id 'c2', which no earlier ToolCall made",
    ),
    "result before its call": (
        [result(), call()],
        "line 2: ToolResult answers call_id 'c1', which no earlier ToolCall made",
    ),
    "a call answered twice": (
        [call(), result(), result()],
        "line 4: ToolResult answers call_id 'c1' a second time",
    ),
    "a call made twice": (
        [call(), call()],
        "line 3: ToolCall 'c1' is made a second time in this run",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_ingest_refuses_a_tool_call_or_result_out_of_place_with_its_line(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    events, message = REFUSED[case]
    path = run_file(tmp_path, events)
    before = position(cli_env)
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    assert_failure_line(err, "INVALID_INPUT", f"{path} {message}")
    assert position(cli_env) == before


def test_a_request_hash_left_out_is_computed_from_the_arguments(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    without = {k: v for k, v in call().items() if k != "request_hash"}
    code, _, err = run(capsys, "ingest", run_file(tmp_path, [without, result()]))
    assert (code, err) == (0, "")
    code, out, _ = run(capsys, "events", "tools-1", "--type", "ToolCall", "--json")
    assert orjson.loads(out)["payload"]["request_hash"] == hash_of(ARGUMENTS)


def test_a_call_no_result_answers_is_a_missing_artifact_and_production_replay_refuses_it(
    cli_env: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Ledger.open(cli_env) as ledger:
        defaults = ledger.snapshots.default_ids()
    answered = run_file(tmp_path, [call(), result()], "answered", defaults)
    code, out, err = run(capsys, "ingest", answered, "--json")
    assert (code, err) == (0, "")
    assert (orjson.loads(out)["replayable"], orjson.loads(out)["missing_artifacts"]) == (True, [])

    events = [call(), call("c2"), result()]
    code, out, err = run(capsys, "ingest", run_file(tmp_path, events, "open", defaults), "--json")
    assert (code, err) == (0, "")
    assert orjson.loads(out)["replayable"] is False
    assert orjson.loads(out)["missing_artifacts"] == [
        {
            "event_type": "ToolCall",
            "missing": ["result"],
            "reason": "no ToolResult in the run answers it",
            "sequence_index": 1,
            "step": "tool call c2 (search)",
        }
    ]

    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin,auditor")
    before = position(cli_env)
    code, out, err = run(capsys, "replay", "open", "--mode", "production")
    assert code == 1
    assert "MISSING_PERSISTED_AGENT_OUTPUT" in out + err
    assert "tool call c2 (search) (event 1): result not persisted" in out + err
    assert position(cli_env) > before  # the refusal is on record, as every replay is
    # Nothing missing: production replay does not refuse it. With no iteration, nothing in it
    # can be re-executed: NOT REPRODUCED, no success (ok means reproduced).
    code, out, err = run(capsys, "replay", "answered", "--mode", "production")
    assert (code, err) == (1, NOT_REPRODUCED_LINE), err


def test_a_batch_with_a_result_for_no_call_is_refused_naming_the_event(api: Api) -> None:
    run_id = api.open_run({"seed": "t-2", "input": "look it up"})
    first = [stage_event("s1"), {"event_id": "t1", "event": call()}]
    assert api.send(run_id, first).status_code == 200
    before = api.position()

    assert_error(
        api.send(run_id, [stage_event("s2"), {"event_id": "t2", "event": result("c9")}]),
        422,
        "INVALID_INPUT",
        "ToolResult answers call_id 'c9', which no earlier ToolCall made",
        "body.events.1.event",
    )
    assert_error(
        api.send(run_id, [{"event_id": "t3", "event": call(request_hash="0" * 64)}]),
        422,
        "INVALID_INPUT",
        "body.events.0.event.ToolCall: request_hash does not match the sha256 of the canonical"
        " JSON of arguments",
        "body.events.0.event.ToolCall",
    )
    assert api.position() == before
    # Re-sent events are skipped, not checked twice; the result that answers the call is taken.
    again = api.send(run_id, [*first, {"event_id": "t4", "event": result()}])
    assert again.json()["accepted"] == 1
