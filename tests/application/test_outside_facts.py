"""Authoritative means proven by the ledger (issue 27), on SQLite and PostgreSQL, with run files
written by hand from Run Event Schema v1, ingested and replayed as ``mace ingest`` and ``mace
replay`` do it on a store each command leaves checkpointed.

A fact only the run vouches for (a tool's result, a model's answer, a retrieval from outside the
ledger, a gate nothing decides again, an emitter's error) is taken as recorded, and makes the
verdict non-authoritative, saying how many and which. A result answers the call it names with a
status its content does not contradict; a request no answer follows is missing, tool call or
retrieval alike. A run naming one model call twice, or a line naming one key twice, is refused
at ingest with its line, nothing written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error, auth
from support.cli_output import assert_failure_line, event_count
from support.hand_written_runs import (
    ingest_and_replay,
    math_iteration,
    run_file,
    with_brainstates,
)
from support.ledger_fixtures import run

from domain.events import hash_of
from infrastructure.storage.settings import Settings

SCHEMA = hash_of({"tool": "lookup"})
SECRET = {"memory_kind": "fact", "labels": ["secret"], "caller_id": "bot"}


def call(call_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "ToolCall",
        "call_id": call_id,
        "tool": tool,
        "tool_schema_hash": SCHEMA,
        "arguments": arguments,
    }


def answer(call_id: str, result: Any, status: str = "ok") -> dict[str, Any]:
    return {"type": "ToolResult", "call_id": call_id, "status": status, "result": result}


def retrieval(uri: str, **extra: Any) -> list[dict[str, Any]]:
    """A retrieval from outside the ledger (no ``memory_position``) whose one hit is ``uri``."""
    query = "capital of france"
    return [
        {
            "type": "RetrievalRequest",
            "request_id": "r1",
            "query": query,
            "request_hash": hash_of(query),
            **extra,
        },
        {"type": "RetrievalResponse", "request_id": "r1", "hits": [{"uri": uri, "score": 1.0}]},
    ]


MODEL_CALL = {
    "type": "ModelCallEnvelope",
    "call_id": "m1",
    "model_id": "gpt-x",
    "model_version": "latest",
    "prompt_bundle_hash": hash_of("prompts"),
    "temperature": 0.9,
    "prompt": "what is 2 + 3?",
    "response": "5",
}


def replayed(
    settings: Settings,
    ids: dict[str, str],
    tmp_path: Path,
    job_id: str,
    extra: list[dict[str, Any]],
) -> tuple[int, dict[str, Any]]:
    """A run whose one iteration re-executes, followed by ``extra``: ingested, then replayed in
    audit mode."""
    body = with_brainstates([*math_iteration(0, "2 + 3", 5), *extra])
    path = run_file(tmp_path, job_id, ids, body, "2 + 3 = 5")
    return ingest_and_replay(settings, path, job_id, "audit")


def assert_refused(
    settings: Settings, capsys: pytest.CaptureFixture[str], path: str, message: str
) -> None:
    """``mace ingest path`` refuses the run with one line, ``message`` after the file's name, and
    writes nothing."""
    before = event_count(settings)
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    assert_failure_line(err, "INVALID_INPUT", f"{path} {message}")
    assert event_count(settings) == before


def checks(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {row["subject"]: (row["check"], row["detail"]) for row in report["checks"]}


OUTSIDE_CLAIMS: dict[str, tuple[list[dict[str, Any]], list[str]]] = {
    "tool results swapped between two calls": (
        [
            call("c1", "weather", {"city": "paris"}),
            call("c2", "quote", {"ticker": "ACME"}),
            answer("c1", {"price": 12}),
            answer("c2", {"temp_c": 21}),
        ],
        ["event 4 ToolCall", "event 5 ToolCall", "event 6 ToolResult", "event 7 ToolResult"],
    ),
    "a retrieval hit naming a forged memory, no memory_position": (
        retrieval("mace://default/memory/forged"),
        ["event 4 RetrievalRequest", "event 5 RetrievalResponse"],
    ),
    "a retrieval hit naming another tenant's memory, no memory_position": (
        retrieval("mace://acme/memory/0123456789abcdef"),
        ["event 4 RetrievalRequest", "event 5 RetrievalResponse"],
    ),
    "a gate with no policy bundle": (
        [{"type": "GateDecision", "gate": "context", "decision": "allow", "subject": SECRET}],
        ["event 4 GateDecision"],
    ),
    "a gate with no subject and no bundle": (
        [{"type": "GateDecision", "gate": "publish", "decision": "allow"}],
        ["event 4 GateDecision"],
    ),
    "a model call at temperature 0.9, version latest, no seed": (
        [MODEL_CALL],
        ["event 4 ModelCallEnvelope"],
    ),
    "a trailing ErrorEvent": (
        [{"type": "ErrorEvent", "code": "OPS", "message": "final answer replaced by operator"}],
        ["event 4 ErrorEvent"],
    ),
}


@pytest.mark.parametrize("case", sorted(OUTSIDE_CLAIMS))
def test_a_fact_only_the_run_vouches_for_leaves_the_verdict_non_authoritative(
    cli_env: Settings, auditor: dict[str, str], tmp_path: Path, case: str
) -> None:
    extra, vouched = OUTSIDE_CLAIMS[case]
    code, report = replayed(cli_env, auditor, tmp_path, "vouched", extra)
    assert (code, report["ok"], report["reproduced"]) == (0, True, True)
    assert report["authoritative"] is False, case
    rows = checks(report)
    assert [subject for subject in vouched if rows[subject][0] == "taken_as_recorded"] == vouched
    facts = "fact" if len(vouched) == 1 else "facts"
    assert report["non_authoritative_reasons"] == [
        f"{len(vouched)} {facts} only the run vouches for, taken as recorded: {', '.join(vouched)}"
    ]
    assert report["check_counts"]["taken_as_recorded"] == len(vouched)


@pytest.mark.parametrize("tenant", ["default", "acme"])
def test_a_hit_naming_a_ledger_memory_with_no_position_says_it_could_not_be_served_again(
    cli_env: Settings, auditor: dict[str, str], tmp_path: Path, tenant: str
) -> None:
    uri = f"mace://{tenant}/memory/forged"
    code, report = replayed(cli_env, auditor, tmp_path, "unplaced", retrieval(uri))
    assert (code, report["authoritative"]) == (0, False)
    assert checks(report)["event 5 RetrievalResponse"] == (
        "taken_as_recorded",
        "hits not served again: the emitter's; response_hash is the hash of its hits as the"
        f" emitter gave them; {uri} names a ledger memory, but no memory_position says where"
        " from",
    )


def test_the_verdict_line_says_how_many_facts_were_taken_as_recorded_and_why(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    replayed(cli_env, auditor, tmp_path, "modelled", [MODEL_CALL])
    code, out, _ = run(capsys, "replay", "modelled")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        "verdict: REPRODUCED, NON-AUTHORITATIVE; of 8 facts: 7 re-executed and matched,"
        " 0 compared by hash, 1 taken as recorded (only the run vouches for it), 0 missing"
    )
    assert (
        "  not authoritative: 1 fact only the run vouches for, taken as recorded:"
        " event 4 ModelCallEnvelope"
    ) in lines
    assert (
        "  taken as recorded: event 4 ModelCallEnvelope: a model call is never made again offline"
        " (seed 003): its response is the emitter's; not pinned: model_version 'latest',"
        " temperature 0.9, no seed; request_hash and response_hash are the hashes of its prompt"
        " and response as the emitter gave them"
    ) in lines


def test_a_model_call_pinned_is_still_only_the_emitters_word(
    cli_env: Settings, auditor: dict[str, str], tmp_path: Path
) -> None:
    pinned = {**MODEL_CALL, "model_version": "2024-08-06", "temperature": 0.0, "seed": 7}
    code, report = replayed(cli_env, auditor, tmp_path, "pinned", [pinned])
    assert (code, report["authoritative"]) == (0, False)
    assert checks(report)["event 4 ModelCallEnvelope"] == (
        "taken_as_recorded",
        "a model call is never made again offline (seed 003): its response is the emitter's;"
        " request_hash and response_hash are the hashes of its prompt and response as the"
        " emitter gave them",
    )


@pytest.mark.parametrize(
    ("status", "result"),
    [("error", {"status": "ok", "temp_c": 21}), ("ok", {"error": "timeout"})],
    ids=["error with an ok result", "ok with an error"],
)
def test_a_tool_result_whose_content_contradicts_its_status_is_refused_with_its_line(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    status: str,
    result: dict[str, Any],
) -> None:
    body = [*math_iteration(0, "2 + 3", 5), call("c1", "weather", {}), answer("c1", result, status)]
    path = run_file(tmp_path, "contradicted", auditor, with_brainstates(body), "2 + 3 = 5")
    said = "ok" if status == "error" else "error"
    assert_refused(
        cli_env,
        capsys,
        path,
        f"line 7: status {status!r} contradicts its result, which says {said!r}: a result's"
        " status is the one its content gives",
    )


@pytest.mark.parametrize("served", [True, False], ids=["from the ledger", "from outside"])
def test_a_retrieval_never_answered_is_missing_as_a_tool_call_never_answered_is(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    served: bool,
) -> None:
    assert run(capsys, "memories", "add", "--episode", "paris is the capital of france")[0] == 0
    (request, _) = retrieval("unused", **({"memory_position": 1} if served else {}))
    code, report = replayed(cli_env, auditor, tmp_path, "unanswered", [request])
    assert (code, report["ok"], report["authoritative"]) == (0, True, False)
    assert checks(report)["event 4 RetrievalRequest"] == (
        "missing",
        "response not persisted: no RetrievalResponse in the run answers it",
    )
    assert report["non_authoritative_reasons"] == [
        "missing from the record: event 4 RetrievalRequest"
    ]
    code, out, err = run(capsys, "replay", "unanswered", "--mode", "production")
    assert code == 1
    assert_failure_line(
        err,
        "MISSING_PERSISTED_AGENT_OUTPUT",
        "retrieval r1 (event 4): response not persisted: no RetrievalResponse in the run"
        " answers it",
    )
    code, out, _ = run(capsys, "jobs", "--non-replayable", "--json")
    assert "unanswered" in out


def test_a_model_call_id_made_twice_is_refused_with_its_line(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = [*math_iteration(0, "2 + 3", 5), MODEL_CALL, {**MODEL_CALL, "response": "6"}]
    path = run_file(tmp_path, "twice", auditor, with_brainstates(body), "2 + 3 = 5")
    message = "line 7: ModelCallEnvelope 'm1' is made a second time in this run"
    assert_refused(cli_env, capsys, path, message)


def test_a_line_naming_one_key_twice_is_refused_with_its_line_and_key(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Read by a parser where the last one wins, the line says "ok"; by one where the first
    # wins, "error": it says nothing the ledger could store as given.
    body = [*math_iteration(0, "2 + 3", 5), call("c1", "weather", {})]
    path = Path(run_file(tmp_path, "keyed", auditor, with_brainstates(body), "2 + 3 = 5"))
    lines = path.read_bytes().splitlines()
    doubled = b'{"type":"ToolResult","call_id":"c1","status":"error","result":null,"status":"ok"}'
    path.write_bytes(b"\n".join([*lines[:-1], doubled, lines[-1]]) + b"\n")
    message = "line 7: key 'status' appears twice in one object: each key may appear once"
    assert_refused(cli_env, capsys, str(path), message)
    assert orjson.loads(doubled)["status"] == "ok"  # what the line was taken to say before


def test_a_forged_hit_at_a_real_position_diverges_in_replay_and_in_verify_alike(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The emitter's false claim, not an alteration of the store: one classification.
    assert run(capsys, "memories", "add", "--episode", "paris is the capital of france")[0] == 0
    forged = retrieval("mace://default/memory/forged", memory_position=1)
    code, report = replayed(cli_env, auditor, tmp_path, "forged", forged)
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    assert report["divergences"][0]["field"] == "event 5 RetrievalResponse hits"
    code, out, err = run(capsys, "verify", "forged", "--check-retrievals")
    assert (code, out) == (1, "")
    assert_failure_line(
        err,
        "REPLAY_DIVERGENCE",
        "retrieval r1 (event 4): hit mace://default/memory/forged is no memory the log held at"
        " position 1",
    )
    code, out, _ = run(capsys, "verify", "forged", "--check-retrievals", "--json")
    assert (code, orjson.loads(out)["error_code"]) == (1, "REPLAY_DIVERGENCE")


def test_a_batch_is_held_to_the_same_rules_as_a_run_file(api: Api) -> None:
    # One rule in one place: what ingest refuses in a line, HTTP refuses in a batch.
    run_id = api.open_run({"seed": "o-1", "input": "look it up"})
    assert api.send(run_id, [{"event_id": "c1", "event": call("c1", "weather", {})}]).is_success
    assert api.send(run_id, [{"event_id": "m1", "event": MODEL_CALL}]).is_success
    before = api.position()
    contradicted = answer("c1", {"error": "timeout"})
    assert_error(
        api.send(run_id, [{"event_id": "r1", "event": contradicted}]),
        422,
        "INVALID_INPUT",
        "body.events.0.event.ToolResult: status 'ok' contradicts its result, which says 'error':"
        " a result's status is the one its content gives",
        "body.events.0.event.ToolResult",
    )
    assert_error(
        api.send(run_id, [{"event_id": "m2", "event": {**MODEL_CALL, "response": "6"}}]),
        422,
        "INVALID_INPUT",
        "ModelCallEnvelope 'm1' is made a second time in this run",
        "body.events.0.event",
    )
    assert api.position() == before


def test_a_body_naming_one_key_twice_is_refused_before_any_route_reads_it(api: Api) -> None:
    # The framework would keep the last pair: "error" read as "ok" by this reader only.
    run_id = api.open_run({"seed": "o-2", "input": "look it up"})
    assert api.send(run_id, [{"event_id": "c1", "event": call("c1", "weather", {})}]).is_success
    before = api.position()
    result = orjson.dumps(answer("c1", {"temperature": 21}))
    twice = result.replace(b'"status":"ok"', b'"status":"error","status":"ok"', 1)
    assert twice != result
    body = b'{"events":[{"event_id":"r1","event":' + twice + b"}]}"
    response = api.client.post(
        f"/v1/runs/{run_id}/events",
        content=body,
        headers={**auth("operator"), "content-type": "application/json"},
    )
    assert_error(
        response,
        422,
        "INVALID_INPUT",
        "request body: key 'status' appears twice in one object: each key may appear once",
    )
    assert api.position() == before
    assert api.send(run_id, [{"event_id": "r1", "event": orjson.loads(result)}]).is_success
