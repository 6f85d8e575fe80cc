"""Replay re-runs every iteration and holds the run's own events to it, not only the trace.

Seed 000 section 6 ("persisted output == trace output"), on SQLite and PostgreSQL, with run files
written by hand (`support.hand_written_runs`): what the Stage-0 runtime does for "2 + 3" and
"4 * 5" under the default snapshots, and the same with one fact changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.hand_written_runs import (
    R1,
    R4,
    ingest_and_replay,
    math_iteration,
    run_file,
    with_brainstates,
)

from infrastructure.storage.settings import Settings


def edited(lines: list[dict[str, Any]], kind: str, **changes: Any) -> list[dict[str, Any]]:
    return [{**line, **changes} if line["type"] == kind else line for line in lines]


TWO_ITERATIONS = with_brainstates([*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 20)])
"""A faithful run: what the runtime does for "2 + 3", then for "4 * 5"."""


def steps_of(report: dict[str, Any], iteration: int) -> list[str]:
    prefix = f"8 iteration {iteration}: "
    return [s["step"].removeprefix(prefix) for s in report["steps"] if s["step"].startswith(prefix)]


def test_a_faithful_two_iteration_run_replays_every_iteration(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    path = run_file(tmp_path, "two", auditor, TWO_ITERATIONS, "4 * 5 = 20")
    code, report = ingest_and_replay(cli_env, path, "two")
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
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    wrong = with_brainstates([*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 21)])
    path = run_file(tmp_path, "two-wrong", auditor, wrong, "4 * 5 = 21")
    code, report = ingest_and_replay(cli_env, path, "two-wrong")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    assert report["error_message"] == "iteration 1: agent_outputs differs from the record"
    assert [(d["iteration"], d["field"]) for d in report["divergences"]] == [(1, "agent_outputs")]
    assert "events.order" in steps_of(report, 0)  # iteration 0 was compared whole, and matched


def test_a_router_decision_event_that_contradicts_its_trace_diverges(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    # The trace and its BrainState are the faithful run's; only the event says otherwise.
    body = edited(with_brainstates(math_iteration(0, "2 + 3", 5)), "RouterDecision", **R4)
    path = run_file(tmp_path, "misrouted-event", auditor, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "misrouted-event")
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
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    faithful = with_brainstates(math_iteration(0, "2 + 3", 5))
    lied = math_iteration(0, "2 + 3", 6)
    output = next(line for line in lied if line["type"] == "AgentOutput")
    body = [output if line["type"] == "AgentOutput" else line for line in faithful]
    path = run_file(tmp_path, "wrong-output", auditor, body, "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "wrong-output")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    (divergence,) = report["divergences"]
    assert (divergence["iteration"], divergence["field"]) == (0, "events.AgentOutput")
    assert divergence["recorded"][0]["response"]["text"] == "2 + 3 = 6"
    assert divergence["replayed"][0]["response"]["text"] == "2 + 3 = 5"


def renumbered(lines: list[dict[str, Any]], iteration: int) -> list[dict[str, Any]]:
    return [{**line, "iteration": iteration} for line in lines]


@pytest.mark.parametrize(
    ("case", "body", "recorded", "expected"),
    [
        (
            "a gap",
            [*math_iteration(0, "2 + 3", 5), *renumbered(math_iteration(1, "4 * 5", 20), 7)],
            [0, 7],
            [0, 1],
        ),
        (
            "reordered",
            [*math_iteration(1, "4 * 5", 20), *math_iteration(0, "2 + 3", 5)],
            [1, 0],
            [0, 1],
        ),
    ],
)
def test_iterations_a_run_skips_or_reorders_diverge(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    case: str,
    body: list[dict[str, Any]],
    recorded: list[int],
    expected: list[int],
) -> None:
    # Each iteration re-runs faithfully on its own: only their places in the run are wrong.
    path = run_file(tmp_path, "placed", auditor, with_brainstates(body), "4 * 5 = 20")
    code, report = ingest_and_replay(cli_env, path, "placed")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE"), case
    assert report["divergences"][0] == {
        "code": "REPLAY_DIVERGENCE",
        "field": "iterations",
        "iteration": None,
        "recorded": recorded,
        "replayed": expected,
    }


def test_a_job_input_its_first_iteration_did_not_read_diverges(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    # The run says it was asked one thing; its first iteration read another.
    body = with_brainstates(math_iteration(0, "4 * 5", 20))
    path = run_file(tmp_path, "asked", auditor, body, "4 * 5 = 20")  # input: "2 + 3"
    code, report = ingest_and_replay(cli_env, path, "asked")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    assert report["divergences"][0] == {
        "code": "REPLAY_DIVERGENCE",
        "field": "job_input",
        "iteration": 0,
        "recorded": "2 + 3",
        "replayed": "4 * 5",
    }
