"""Replay re-runs every iteration and holds the run's own events to it, not only the trace.

Seed 000 section 6 ("persisted output == trace output"), on SQLite and PostgreSQL. The run files
are written by hand from Run Event Schema v1: what the Stage-0 runtime does for "2 + 3" and
"4 * 5" under the default snapshots, line by line. Only the BrainState digests in the traces are
folded by the BrainState reducer (its own golden tests pin it): they hold seeded jitter no one
would work out by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.ledger_fixtures import run

from domain.events import INGEST_LINE, MaterialisedState, RunEvent, hash_of
from domain.snapshot import SnapshotKind
from domain.stage0.config import BrainStateConfig, parse_config
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import default_snapshots
from infrastructure.storage.settings import Settings
from projections.brainstate import fold_brainstate

SEED = "two-steps"
USER = "default"
R1 = {"agent": "math_agent", "fallback": None, "rule_id": "R1", "why": "matched_R1_math"}
R4 = {"agent": "generic_agent", "fallback": None, "rule_id": "R4", "why": "matched_R4_fallback"}


def math_iteration(iteration: int, expression: str, value: int) -> list[dict[str, Any]]:
    """One iteration of the math agent answering ``expression``: its events and its trace."""
    prompt = {"after_failure": False, "text": expression, "user": USER}
    answer = f"{expression} = {value}"
    claims = [{"expression": expression, "value": value}]
    evidence = [{"agent": "math_agent", "kind": "computation"}]
    response = {"claims": claims, "evidence": evidence, "text": answer}
    output = {
        "agent": "math_agent",
        "status": "ok",
        "prompt": prompt,
        "response": response,
        "request_hash": hash_of(prompt),
        "response_hash": hash_of(response),
        "error": None,
    }
    return [
        {"type": "InputReceived", "iteration": iteration, "text": expression, "user": USER},
        {"type": "RouterDecision", "iteration": iteration, **R1},
        {"type": "AgentOutput", "iteration": iteration, **output},
        {
            "type": "IterationTrace",
            "iteration": iteration,
            "router_decision": R1,
            "selected_agents": ["math_agent"],
            "agent_outputs": [output],
            "sem_reads": [],
            "sem_writes": [],
            "final_output": answer,
            "claims": claims,
            "evidence_items": evidence,
        },
    ]


def with_brainstates(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trace given the BrainState before its iteration and after its last event."""
    config = parse_config(
        SnapshotKind.BRAINSTATE, default_snapshots()[SnapshotKind.BRAINSTATE].payload
    )
    assert isinstance(config, BrainStateConfig)
    done: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None
    for line in lines:
        if line["type"] == "InputReceived":
            before = state(config, done)
        brainstates = {"brainstate_before": before, "brainstate_after": state(config, done)}
        done.append({**line, **brainstates} if line["type"] == "IterationTrace" else line)
    return done


def state(config: BrainStateConfig, lines: list[dict[str, Any]]) -> dict[str, Any]:
    events: list[RunEvent] = [INGEST_LINE.validate_python(line) for line in lines]
    return MaterialisedState.of(fold_brainstate(config, events, SEED)).model_dump()


def run_file(
    tmp_path: Path,
    job_id: str,
    snapshot_ids: dict[str, str],
    body: list[dict[str, Any]],
    final_output: str,
) -> str:
    started = {
        "type": "RunStarted",
        "job_id": job_id,
        "seed": SEED,
        "input": "2 + 3",
        "snapshot_ids": snapshot_ids,
        "capture_mode": "full_io",
    }
    lines = [
        started,
        *body,
        {"type": "RunCompleted", "final_output": final_output},
    ]
    path = tmp_path / f"{job_id}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def edited(lines: list[dict[str, Any]], kind: str, **changes: Any) -> list[dict[str, Any]]:
    return [{**line, **changes} if line["type"] == kind else line for line in lines]


TWO_ITERATIONS = with_brainstates([*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 20)])
"""A faithful run: what the runtime does for "2 + 3", then for "4 * 5"."""


@pytest.fixture
def auditor(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin,auditor")
    with Ledger.open(cli_env) as ledger:
        return ledger.snapshots.default_ids()


def ingest_and_replay(
    capsys: pytest.CaptureFixture[str], path: str, job_id: str
) -> tuple[int, dict[str, Any]]:
    code, _, err = run(capsys, "ingest", path)
    assert (code, err) == (0, "")
    code, out, _ = run(capsys, "replay", job_id, "--mode", "production", "--json")
    return code, orjson.loads(out)


def steps_of(report: dict[str, Any], iteration: int) -> list[str]:
    prefix = f"8 iteration {iteration}: "
    return [s["step"].removeprefix(prefix) for s in report["steps"] if s["step"].startswith(prefix)]


def test_a_faithful_two_iteration_run_replays_every_iteration(
    auditor: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = run_file(tmp_path, "two", auditor, TWO_ITERATIONS, "4 * 5 = 20")
    code, report = ingest_and_replay(capsys, path, "two")
    assert (code, report["ok"], report["authoritative"]) == (0, True, True), report["steps"][-1]
    for iteration in (0, 1):
        compared = steps_of(report, iteration)
        assert "final_output" in compared
        assert "events.RouterDecision" in compared
        assert "events.AgentOutput" in compared
        assert "events.order" in compared
    assert report["steps"][-2] == {
        "step": "9 final answer",
        "outcome": "ok",
        "detail": "the computed final answer equals the stored final_answer",
    }


def test_a_second_iteration_the_runtime_would_not_give_diverges_there(
    auditor: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = with_brainstates([*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 21)])
    path = run_file(tmp_path, "two-wrong", auditor, wrong, "4 * 5 = 21")
    code, report = ingest_and_replay(capsys, path, "two-wrong")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    assert report["error_message"] == "iteration 1: agent_outputs differs from the record"
    assert [(d["iteration"], d["field"]) for d in report["divergences"]] == [(1, "agent_outputs")]
    assert "events.order" in steps_of(report, 0)  # iteration 0 was compared whole, and matched


def test_a_router_decision_event_that_contradicts_its_trace_diverges(
    auditor: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The trace and its BrainState are the faithful run's; only the event says otherwise.
    body = edited(with_brainstates(math_iteration(0, "2 + 3", 5)), "RouterDecision", **R4)
    path = run_file(tmp_path, "misrouted-event", auditor, body, "2 + 3 = 5")
    code, report = ingest_and_replay(capsys, path, "misrouted-event")
    assert (code, report["ok"], report["error_code"]) == (1, False, "REPLAY_DIVERGENCE")
    assert report["divergences"] == [
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": 0,
            "field": "events.RouterDecision",
            "recorded": [{"iteration": 0, "schema_version": 1, **R4}],
            "replayed": [{"iteration": 0, "schema_version": 1, **R1}],
        }
    ]


def test_an_agent_output_event_that_contradicts_its_trace_diverges(
    auditor: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faithful = with_brainstates(math_iteration(0, "2 + 3", 5))
    lied = math_iteration(0, "2 + 3", 6)
    output = next(line for line in lied if line["type"] == "AgentOutput")
    body = [output if line["type"] == "AgentOutput" else line for line in faithful]
    path = run_file(tmp_path, "wrong-output", auditor, body, "2 + 3 = 5")
    code, report = ingest_and_replay(capsys, path, "wrong-output")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    (divergence,) = report["divergences"]
    assert (divergence["iteration"], divergence["field"]) == (0, "events.AgentOutput")
    assert divergence["recorded"][0]["response"]["text"] == "2 + 3 = 6"
    assert divergence["replayed"][0]["response"]["text"] == "2 + 3 = 5"
