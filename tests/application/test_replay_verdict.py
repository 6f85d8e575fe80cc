"""A replay's verdict says what it checked, and how, fact by fact; it is never OK for what it
skipped. On SQLite and PostgreSQL, through the use cases ``mace ingest`` and ``mace replay`` call
(`ingest_and_replay`; the printed report is ``mace replay``'s own), with run files written by hand
from Run Event Schema v1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.hand_written_runs import (
    ingest_and_replay,
    math_iteration,
    run_file,
    with_brainstates,
)
from support.ledger_fixtures import run

from domain.events import hash_of
from infrastructure.storage.settings import Settings

SCHEMA = hash_of({"tool": "search"})
ARGUMENTS = {"q": "capital of france"}
RESULT = {"hits": ["paris"]}
CALL = {
    "type": "ToolCall",
    "call_id": "c1",
    "tool": "search",
    "tool_schema_hash": SCHEMA,
    "arguments": ARGUMENTS,
}
ANSWER = {"type": "ToolResult", "call_id": "c1", "status": "ok", "result": RESULT}
RETRIEVAL: list[dict[str, Any]] = [
    {
        "type": "RetrievalRequest",
        "request_id": "r1",
        "query": "capital of france",
        "request_hash": hash_of("capital of france"),
    },
    {
        "type": "RetrievalResponse",
        "request_id": "r1",
        "hits": [{"uri": "doc://atlas/france", "score": 0.9}],
    },
]
GATE = {"type": "GateDecision", "gate": "publish", "decision": "allow"}
KINDS = ("InputReceived", "RouterDecision", "AgentOutput", "IterationTrace")


def rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(row["subject"], row["check"]) for row in report["checks"]]


def test_a_run_nothing_in_which_can_be_re_executed_is_not_reproduced_nor_authoritative(
    cli_env: Settings, auditor: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run_file(tmp_path, "outside", auditor, [CALL, ANSWER, *RETRIEVAL, GATE], "paris")
    code, report = ingest_and_replay(cli_env, path, "outside")
    # Nothing failed (every signature and kept hash checked out), yet nothing was reproduced:
    # ok means reproduced, so the replay is no success.
    assert code == 1
    assert (report["ok"], report["reproduced"], report["authoritative"]) == (False, False, False)
    assert report["error_code"] is None
    assert report["non_authoritative_reasons"] == [
        "final answer: no iteration was re-run, so the recorded answer is not reproduced",
        "5 facts only the run vouches for, taken as recorded: event 0 ToolCall, event 1"
        " ToolResult, event 2 RetrievalRequest, event 3 RetrievalResponse, event 4 GateDecision",
        "none of the run's events was re-executed: each was taken as recorded or compared by"
        " its hash",
    ]
    assert rows(report) == [
        ("event 0 ToolCall", "taken_as_recorded"),
        ("event 1 ToolResult", "taken_as_recorded"),
        ("event 2 RetrievalRequest", "taken_as_recorded"),
        ("event 3 RetrievalResponse", "taken_as_recorded"),
        ("event 4 GateDecision", "taken_as_recorded"),
        ("materialised selfrep", "reexecuted"),
        ("materialised brainstate", "reexecuted"),
        ("final answer", "taken_as_recorded"),
    ]
    assert report["checks"][1]["detail"] == (
        "re-applied from its recorded result, never by calling the tool (seed 002): what the tool"
        " answered is the emitter's; response_hash is the hash of its result as the emitter gave"
        " it"
    )
    assert report["checks"][4]["detail"] == (
        "a gate decision naming no policy bundle and subject: nothing to decide it by"
    )
    code, out, err = run(capsys, "replay", "outside")
    assert (code, err) == (
        1,
        "mace: NOT REPRODUCED: none of the run's events could be re-executed\n",
    )
    assert out.splitlines()[0] == (
        "verdict: NOT REPRODUCED (none of the run's events could be re-executed),"
        " NON-AUTHORITATIVE; of 8 facts: 2 re-executed and matched, 0 compared by hash,"
        " 6 taken as recorded (only the run vouches for them), 0 missing"
    )
    assert (
        "  taken as recorded: event 4 GateDecision: a gate decision naming no policy bundle and"
        " subject: nothing to decide it by"
    ) in out


def test_an_iteration_with_a_tool_pair_is_reproduced_and_the_tool_pair_taken_as_recorded(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    # The tool's answer and its hash both come from the emitter: the replay re-applies it, it
    # does not prove it, so the verdict cannot be authoritative.
    body = with_brainstates([*math_iteration(0, "2 + 3", 5), CALL, ANSWER])
    path = run_file(tmp_path, "with-tool", auditor, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "with-tool")
    assert (code, report["reproduced"], report["authoritative"]) == (0, True, False)
    assert rows(report) == [
        ("event 0 InputReceived", "reexecuted"),
        ("event 1 RouterDecision", "reexecuted"),
        ("event 2 AgentOutput", "reexecuted"),
        ("event 3 IterationTrace", "reexecuted"),
        ("event 4 ToolCall", "taken_as_recorded"),
        ("event 5 ToolResult", "taken_as_recorded"),
        ("materialised selfrep", "reexecuted"),
        ("materialised brainstate", "reexecuted"),
        ("final answer", "reexecuted"),
    ]
    assert report["check_counts"] == {
        "reexecuted": 7,
        "hash_compared": 0,
        "taken_as_recorded": 2,
        "missing": 0,
        "diverged": 0,
        "not_checked": 0,
    }


def test_a_response_kept_as_its_hash_is_compared_by_it_and_a_result_so_kept_taken_as_recorded(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    hashed_answer = {**ANSWER, "result": None, "response_hash": hash_of(RESULT)}
    iteration = math_iteration(0, "2 + 3", 5, response_kept=False)
    body = with_brainstates([*iteration, CALL, hashed_answer])
    path = run_file(tmp_path, "hashes", auditor, body, "2 + 3 = 5", capture_mode="prompts_only")
    code, report = ingest_and_replay(cli_env, path, "hashes", mode="audit")
    assert (code, report["reproduced"], report["authoritative"]) == (0, True, False)
    checked = dict(rows(report))
    assert checked["event 2 AgentOutput"] == "hash_compared"
    assert checked["event 5 ToolResult"] == "taken_as_recorded"
    assert report["checks"][5]["detail"] == (
        "result not persisted: the emitter recorded the hash of result only"
    )


def test_a_call_no_result_answers_is_missing_and_the_audit_is_not_authoritative(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    body = with_brainstates([*math_iteration(0, "2 + 3", 5), CALL])
    path = run_file(tmp_path, "unanswered", auditor, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "unanswered", mode="audit")
    assert (code, report["ok"], report["authoritative"]) == (0, True, False)
    assert ("event 4 ToolCall", "missing") in rows(report)
    assert report["non_authoritative_reasons"] == ["missing from the record: event 4 ToolCall"]


def test_a_diverging_iteration_marks_only_what_diverged_and_what_follows_unchecked(
    cli_env: Settings, auditor: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = with_brainstates([*math_iteration(0, "2 + 3", 6), *math_iteration(1, "4 * 5", 20)])
    path = run_file(tmp_path, "wrong-first", auditor, body, "4 * 5 = 20")
    code, report = ingest_and_replay(cli_env, path, "wrong-first")
    assert (code, report["error_code"], report["reproduced"]) == (1, "REPLAY_DIVERGENCE", False)
    # The step log stops at the agent's outputs of iteration 0: the table agrees. The input and
    # the routing of that iteration equal the re-run's (matched); the agent's output and the trace
    # that carries it differ (diverged); the next iteration was never reached (not checked).
    (stop,) = [step for step in report["steps"] if step["outcome"] == "failed"]
    assert stop["step"] == "compare agent_outputs (iteration 0)"
    assert rows(report) == [
        ("event 0 InputReceived", "reexecuted"),
        ("event 1 RouterDecision", "reexecuted"),
        ("event 2 AgentOutput", "diverged"),
        ("event 3 IterationTrace", "diverged"),
        *[(f"event {n} {kind}", "not_checked") for n, kind in enumerate(KINDS, start=4)],
        ("materialised selfrep", "reexecuted"),  # the reducers ran before the iterations
        ("materialised brainstate", "reexecuted"),
    ]
    assert report["checks"][2]["detail"] == (
        "the re-run differs from the record: agent_outputs (iteration 0)"
    )
    code, out, _ = run(capsys, "replay", "wrong-first")
    assert out.splitlines()[0] == (
        "verdict: FAILED REPLAY_DIVERGENCE, authoritative; of 10 facts: 4 re-executed and"
        " matched, 0 compared by hash, 0 taken as recorded, 0 missing, 2 diverged, 4 not checked"
    )
