"""One Stage-0 job from input to answer, run purely over an in-memory SEM and the default snapshots.

The job's events come in a fixed order (InputReceived, RouterDecision, SEM reads and writes,
AgentOutput per agent called, IterationTrace); the trace holds exactly seed 004 section 5's
replay-equality fields; F3, F4 and F5 take the paths the seed describes; the capture mode decides
what model I/O is kept, never the hashes; the same inputs give the same events.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.stage0_support import InMemorySem, fact, seed_004_text

from domain.canonical import canonical_json
from domain.events import (
    EQUALITY_FIELDS,
    AgentOutput,
    InputReceived,
    IterationTrace,
    MaterialisedState,
    RouterDecision,
    RunEvent,
    SemWrite,
    hash_of,
)
from domain.job import CaptureMode
from domain.stage0.config import (
    DEFAULT_BRAINSTATE,
    DEFAULT_GOVERNANCE,
    DEFAULT_PRIVACY,
    DEFAULT_ROUTER,
    DEFAULT_SELFREP,
    AgentProfile,
    RouterConfig,
    RouterRule,
    SelfRepConfig,
)
from domain.stage0.replies import F3_NO_AGENT, F4_AGENT_FAILURE, F5_SEM_WRITE_FAILURE
from projections.brainstate import fold_brainstate, initial_brainstate
from projections.selfrep import fold_selfrep
from projections.stage0_runtime import Stage0Run, Stage0Snapshots, run_stage0

DEFAULTS = Stage0Snapshots(
    selfrep=DEFAULT_SELFREP,
    brainstate=DEFAULT_BRAINSTATE,
    router=DEFAULT_ROUTER,
    privacy=DEFAULT_PRIVACY,
    governance=DEFAULT_GOVERNANCE,
)
FAVORITE_COLOR = "user/person/alice/favorite_color"


def run(
    text: str,
    *,
    sem: InMemorySem | None = None,
    snapshots: Stage0Snapshots = DEFAULTS,
    seed: str = "seed-1",
    mode: CaptureMode = CaptureMode.FULL_IO,
) -> Stage0Run:
    return run_stage0("job-1", seed, text, "alice", snapshots, sem or InMemorySem(), mode)


def types(result: Stage0Run) -> list[str]:
    return [event.EVENT_TYPE for event in result.events]


def trace(result: Stage0Run) -> IterationTrace:
    last = result.events[-1]
    assert isinstance(last, IterationTrace)
    return last


def outputs(result: Stage0Run) -> list[AgentOutput]:
    return [event for event in result.events if isinstance(event, AgentOutput)]


# Event order and the iteration trace


@pytest.mark.parametrize(
    ("text", "sem", "expected"),
    [
        ("2 + 3", InMemorySem(), ["AgentOutput"]),
        ("hello", InMemorySem(), ["AgentOutput"]),
        ("my favorite color is blue", InMemorySem(), ["SemWrite", "AgentOutput"]),
        ("what is my favorite color?", InMemorySem(), ["SemRead", "AgentOutput"]),
        (
            "what is the capital of france",
            InMemorySem(fact("world/country/france/capital", "Paris")),
            ["SemRead", "AgentOutput"],
        ),
        ("4 / 0", InMemorySem(), ["AgentOutput", "AgentOutput"]),
        ("my favorite color", InMemorySem(), ["AgentOutput", "AgentOutput"]),
    ],
)
def test_event_order(text: str, sem: InMemorySem, expected: list[str]) -> None:
    assert types(run(text, sem=sem)) == [
        "InputReceived",
        "RouterDecision",
        *expected,
        "IterationTrace",
    ]


def test_events_start_from_the_input_and_the_router_decision() -> None:
    result = run("2 + 3")
    assert result.events[:2] == [
        InputReceived(iteration=0, text="2 + 3", user="alice"),
        RouterDecision(iteration=0, rule_id="R1", agent="math_agent", why="matched_R1_math"),
    ]
    assert all(getattr(event, "iteration", None) == 0 for event in result.events)


def test_iteration_trace_holds_exactly_the_seed_004_equality_fields() -> None:
    payload = trace(run("2 + 3")).payload()
    assert set(payload) == {*EQUALITY_FIELDS, "iteration", "schema_version"}
    assert payload["schema_version"] == 1
    assert payload["iteration"] == 0


def test_equality_fields_are_seed_004_section_5_in_order() -> None:
    section = seed_004_text().split("## 5. Replay Equality Requirements", 1)[1]
    assert tuple(re.findall(r"^- `([a-z_]+)`$", section, re.MULTILINE)) == EQUALITY_FIELDS


def test_iteration_trace_of_a_math_job() -> None:
    result = run("2 + 3")
    payload = trace(result).payload()
    [output] = outputs(result)
    assert payload["router_decision"] == {
        "rule_id": "R1",
        "agent": "math_agent",
        "why": "matched_R1_math",
        "fallback": None,
    }
    assert payload["selected_agents"] == ["math_agent"]
    assert payload["agent_outputs"] == [output.trace_entry()]
    assert payload["sem_reads"] == []
    assert payload["sem_writes"] == []
    assert payload["final_output"] == "2 + 3 = 5" == result.final_output
    assert payload["council_votes"] == []
    assert payload["claims"] == [{"expression": "2 + 3", "value": 5}]
    assert payload["evidence_items"] == [{"kind": "computation", "agent": "math_agent"}]


def test_iteration_trace_brainstate_before_and_after_are_the_folded_states() -> None:
    result = run("2 + 3")
    payload = trace(result).payload()
    before = initial_brainstate(DEFAULT_BRAINSTATE)
    after = fold_brainstate(DEFAULT_BRAINSTATE, result.events[:-1], "seed-1")
    assert payload["brainstate_before"] == MaterialisedState.of(before).model_dump()
    assert payload["brainstate_after"] == MaterialisedState.of(after).model_dump()
    assert [n["kind"] for n in after["nodes"]] == ["percept", "output", "route"]


def test_iteration_trace_records_sem_reads_and_writes() -> None:
    sem = InMemorySem(fact(FAVORITE_COLOR, "blue"))
    read = trace(run("what is my favorite color?", sem=sem)).payload()
    last_updated = fact(FAVORITE_COLOR, "blue").read().last_updated
    assert read["sem_reads"] == [
        {"key": FAVORITE_COLOR, "exists": True, "value": "blue", "last_updated": last_updated}
    ]
    assert read["final_output"] == "Your favorite color is blue."

    written = run("my favorite color is green", sem=sem)
    [entry] = written.sem_writes
    assert entry.read().value == "green"
    assert entry.version == 2  # S5: it overwrote the stored blue
    assert trace(written).payload()["sem_writes"] == [
        {
            "key": FAVORITE_COLOR,
            "value": "green",
            "status": "written",
            "last_updated": entry.read().last_updated,
            "reason": None,
        }
    ]
    assert sem.entries[FAVORITE_COLOR].read().value == "blue"  # the source is not touched


# F3, F4 and F5


def test_F4_agent_failure_falls_back_to_generic_agent() -> None:
    result = run("4 / 0")
    failed, fallback = outputs(result)
    assert failed.agent == "math_agent"
    assert failed.status == "failed"
    assert failed.error == "ZeroDivisionError: Fraction(4, 0)"
    assert failed.response is None
    assert fallback.agent == "generic_agent"
    assert fallback.status == "ok"
    assert fallback.prompt == {"text": "4 / 0", "user": "alice", "after_failure": True}
    payload = trace(result).payload()
    assert payload["selected_agents"] == ["math_agent", "generic_agent"]
    assert payload["router_decision"]["agent"] == "math_agent"
    assert result.final_output == F4_AGENT_FAILURE == payload["final_output"]


def test_F4_marks_the_failed_agent_degraded() -> None:
    selfrep = fold_selfrep(DEFAULT_SELFREP, run("4 / 0").events)
    assert selfrep["agents"]["math_agent"] == {"status": "degraded", "calls": 1, "failures": 1}
    assert selfrep["agents"]["generic_agent"] == {"status": "available", "calls": 1, "failures": 0}


def test_F4_overflow_is_an_agent_failure() -> None:
    result = run("2 ^ 70")
    assert outputs(result)[0].error == "OverflowError: 2 ^ 70 exceeds the signed 64-bit range"
    assert result.final_output == F4_AGENT_FAILURE


def test_F3_unavailable_agent_is_never_called() -> None:
    agents = {**DEFAULT_SELFREP.agents, "math_agent": AgentProfile(status="unavailable")}
    snapshots = Stage0Snapshots(
        selfrep=SelfRepConfig(agents=agents),
        brainstate=DEFAULT_BRAINSTATE,
        router=DEFAULT_ROUTER,
        privacy=DEFAULT_PRIVACY,
        governance=DEFAULT_GOVERNANCE,
    )
    result = run("2 + 3", snapshots=snapshots)
    assert result.events[1] == RouterDecision(
        iteration=0, rule_id="R1", agent="generic_agent", why="matched_R1_math", fallback="F3"
    )
    assert [o.agent for o in outputs(result)] == ["generic_agent"]
    assert trace(result).payload()["selected_agents"] == ["generic_agent"]
    assert result.final_output == F3_NO_AGENT


def test_F3_declining_agent_hands_over_to_generic_agent() -> None:
    result = run("my favorite color")
    declined, fallback = outputs(result)
    assert (declined.agent, declined.status, declined.error) == ("profile_agent", "declined", None)
    assert fallback.prompt == {"text": "my favorite color", "user": "alice", "after_failure": False}
    assert trace(result).payload()["selected_agents"] == ["profile_agent", "generic_agent"]
    assert result.final_output == F3_NO_AGENT


def test_F3_fallback_rule_answers_with_generic_agent() -> None:
    result = run("hello")
    assert result.events[1] == RouterDecision(
        iteration=0, rule_id="R4", agent="generic_agent", why="matched_R4_fallback"
    )
    assert result.final_output == F3_NO_AGENT


def test_F3_agent_without_a_module_is_not_an_agent_failure() -> None:
    weather = RouterRule(rule_id="R0", pattern="weather", agent="weather_agent", why="weather")
    agents = {**DEFAULT_SELFREP.agents, "weather_agent": AgentProfile()}
    snapshots = Stage0Snapshots(
        selfrep=SelfRepConfig(agents=agents),
        brainstate=DEFAULT_BRAINSTATE,
        router=RouterConfig(rules=[weather, *DEFAULT_ROUTER.rules]),
        privacy=DEFAULT_PRIVACY,
        governance=DEFAULT_GOVERNANCE,
    )
    result = run("what is the weather", snapshots=snapshots)
    assert result.final_output == F3_NO_AGENT


def test_F5_privacy_policy_denies_the_attribute() -> None:
    result = run("remember my password is x")
    assert types(result) == [
        "InputReceived",
        "RouterDecision",
        "SemWrite",
        "AgentOutput",
        "IterationTrace",
    ]
    write = result.events[2]
    assert write == SemWrite(
        iteration=0,
        key="user/person/alice/password",
        value="x",
        status="failed",
        reason="the privacy policy denies storing attribute 'password'",
    )
    assert result.sem_writes == []
    assert result.final_output == F5_SEM_WRITE_FAILURE


# Capture modes


def _captured(mode: CaptureMode) -> list[AgentOutput]:
    return outputs(run("4 / 0", mode=mode)) + outputs(run("2 + 3", mode=mode))


@pytest.mark.parametrize(
    ("mode", "keeps_prompt", "keeps_response"),
    [
        (CaptureMode.FULL_IO, True, True),
        (CaptureMode.PROMPTS_ONLY, True, False),
        (CaptureMode.NONE, False, False),
    ],
)
def test_capture_mode_decides_what_is_kept_never_the_hashes(
    mode: CaptureMode, keeps_prompt: bool, keeps_response: bool
) -> None:
    full = _captured(CaptureMode.FULL_IO)
    captured = _captured(mode)
    assert all(o.prompt is not None for o in full)
    assert [o.response is not None for o in full] == [False, True, True]  # math failed first
    for complete, kept in zip(full, captured, strict=True):
        assert kept.request_hash == complete.request_hash == hash_of(complete.prompt)
        assert kept.response_hash == complete.response_hash == hash_of(complete.response)
        assert kept.prompt == (complete.prompt if keeps_prompt else None)
        assert kept.response == (complete.response if keeps_response else None)


@pytest.mark.parametrize("mode", list(CaptureMode))
def test_capture_mode_applies_to_the_trace_too(mode: CaptureMode) -> None:
    result = run("2 + 3", mode=mode)
    assert trace(result).payload()["agent_outputs"] == [o.trace_entry() for o in outputs(result)]


# Determinism


def _payloads(result: Stage0Run) -> list[tuple[str, bytes]]:
    return [(event.EVENT_TYPE, canonical_json(event.payload())) for event in result.events]


@pytest.mark.parametrize(
    "text",
    ["2 + 3", "4 / 0", "my favorite color is blue", "what is my favorite color?", "hello"],
)
def test_same_inputs_give_equal_events(text: str) -> None:
    def sem() -> InMemorySem:
        return InMemorySem(fact(FAVORITE_COLOR, "blue"))

    first, second = run(text, sem=sem()), run(text, sem=sem())
    assert _payloads(first) == _payloads(second)
    assert first.final_output == second.final_output
    assert [e.read() for e in first.sem_writes] == [e.read() for e in second.sem_writes]


def _node_ids(event: RunEvent, state: str) -> list[Any]:
    assert isinstance(event, IterationTrace)
    materialised: Any = getattr(event, state)
    return [node["node_id"] for node in materialised["state"]["nodes"]]


def test_a_different_seed_changes_brainstate_node_ids() -> None:
    one, other = run("2 + 3", seed="seed-1"), run("2 + 3", seed="seed-2")
    assert _node_ids(one.events[-1], "brainstate_before") == []
    ids_one = _node_ids(one.events[-1], "brainstate_after")
    ids_other = _node_ids(other.events[-1], "brainstate_after")
    assert len(ids_one) == len(ids_other) == 3
    assert set(ids_one).isdisjoint(ids_other)
    # Everything else the job did is the same.
    assert _payloads(one)[:-1] == _payloads(other)[:-1]
