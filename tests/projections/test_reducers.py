"""Properties of the SelfRepresentation and BrainState reducers (seed 000 sections 3 and 4).

BrainState is a pure function of its snapshot, the ordered events and the job seed: nodes are
always in ``(apt desc, node_id asc)`` order, never more than the capacity, each apt in [0, 1]
and already in its canonical 9-decimal form; and because the state carries how many RNG blocks
it drew, folding can stop and resume anywhere. SelfRepresentation counts calls and failures.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from domain.canonical import canonical_copy
from domain.determinism import wm_id
from domain.events import (
    AgentOutput,
    InputReceived,
    ModelCallEnvelope,
    RetrievalHit,
    RetrievalResponse,
    RouterDecision,
    RunEvent,
    SemRead,
    SemWrite,
    StageTransition,
    ToolResult,
    hash_of,
)
from domain.stage0.config import (
    AgentProfile,
    BrainStateConfig,
    SelfRepConfig,
    WorkingMemoryConfig,
    WorkingMemoryNode,
    node_order,
)
from projections.brainstate import (
    SALIENCE,
    apply_brainstate,
    fold_brainstate,
    initial_brainstate,
)
from projections.selfrep import apply_selfrep, available_agents, fold_selfrep, initial_selfrep

H = hash_of("x")
SEEDS = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(min_size=1))
AGENT_NAMES = st.sampled_from(["math_agent", "profile_agent", "generic_agent", "new_agent"])
STATUSES = st.sampled_from(["ok", "declined", "failed"])
LABELS = st.text(max_size=100)
APTS = st.floats(min_value=0, max_value=1).map(canonical_copy)


def _agent_output(agent: str, status: str) -> AgentOutput:
    return AgentOutput.model_validate(
        {"iteration": 0, "agent": agent, "status": status, "prompt": {"t": 1}, "response": None}
        | ({"response_hash": H} if status != "ok" else {"response": {"text": "ok"}})
    )


EVENTS: st.SearchStrategy[RunEvent] = st.one_of(
    st.builds(lambda t: InputReceived(iteration=0, text=t, user="u"), LABELS),
    st.builds(lambda a: RouterDecision(iteration=0, rule_id="R1", agent=a, why="w"), AGENT_NAMES),
    st.builds(
        lambda e: SemRead(iteration=0, key="a/b/c/d", exists=e, value=e or None), st.booleans()
    ),
    st.builds(
        lambda ok: SemWrite(
            iteration=0, key="a/b/c/d", value=1, status="written" if ok else "failed"
        ),
        st.booleans(),
    ),
    st.builds(_agent_output, AGENT_NAMES, STATUSES),
    st.builds(
        lambda c: ModelCallEnvelope.model_validate(
            {
                "call_id": c,
                "model_id": "m",
                "model_version": "1",
                "prompt_bundle_hash": H,
                "temperature": 0,
                "request_hash": H,
                "response_hash": H,
            }
        ),
        st.text(min_size=1, max_size=10),
    ),
    st.builds(lambda c: ToolResult(call_id=c, status="ok", response_hash=H), st.just("call")),
    st.builds(
        lambda r: RetrievalResponse(request_id=r, hits=[RetrievalHit(uri="u", score=0.5)]),
        st.just("req"),
    ),
    st.builds(lambda s: StageTransition(to_stage=s), st.just("act")),
)
NODES = st.lists(
    st.builds(
        lambda i, kind, apt: WorkingMemoryNode(node_id=f"n{i}", kind=kind, label=kind, apt=apt),
        st.integers(0, 50),
        st.sampled_from(sorted(SALIENCE)),
        APTS,
    ),
    max_size=8,
    unique_by=lambda node: node.node_id,
)
CONFIGS = st.builds(
    lambda capacity, decay, jitter, nodes: BrainStateConfig(
        working_memory=WorkingMemoryConfig(
            capacity=capacity, decay=decay, jitter=jitter, nodes=nodes
        )
    ),
    st.integers(1, 10),
    st.floats(min_value=0.01, max_value=1).map(canonical_copy),
    st.floats(min_value=0, max_value=0.5).map(canonical_copy),
    NODES,
)
EVENT_LISTS = st.lists(EVENTS, max_size=25)


def _states(config: BrainStateConfig, events: list[RunEvent], seed: int | str) -> list[Any]:
    state = initial_brainstate(config)
    states = [state]
    for event in events:
        state = apply_brainstate(state, event, seed)
        states.append(state)
    return states


# BrainState


@given(CONFIGS, EVENT_LISTS, SEEDS)
def test_brainstate_fold_is_deterministic(
    config: BrainStateConfig, events: list[RunEvent], seed: int | str
) -> None:
    assert fold_brainstate(config, events, seed) == fold_brainstate(config, list(events), seed)


@given(CONFIGS, EVENT_LISTS, SEEDS)
def test_brainstate_nodes_are_ordered_bounded_and_canonical(
    config: BrainStateConfig, events: list[RunEvent], seed: int | str
) -> None:
    for state in _states(config, events, seed):
        nodes = state["nodes"]
        assert nodes == sorted(nodes, key=node_order)
        assert len(nodes) <= state["capacity"] == config.working_memory.capacity
        assert len({node["node_id"] for node in nodes}) == len(nodes)
        for node in nodes:
            assert 0.0 <= node["apt"] <= 1.0
            assert canonical_copy(node["apt"]) == node["apt"]


@given(CONFIGS, EVENT_LISTS, SEEDS, st.data())
def test_brainstate_folding_in_two_halves_equals_folding_at_once(
    config: BrainStateConfig, events: list[RunEvent], seed: int | str, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(events)))
    state = fold_brainstate(config, events[:cut], seed)
    for event in events[cut:]:
        state = apply_brainstate(state, event, seed)
    assert state == fold_brainstate(config, events, seed)


@given(CONFIGS, EVENT_LISTS, SEEDS)
def test_brainstate_counts_nodes_added_and_rng_blocks_drawn(
    config: BrainStateConfig, events: list[RunEvent], seed: int | str
) -> None:
    states = _states(config, events, seed)
    added = 0
    draws = 0
    for before, after in itertools.pairwise(states):
        if after is before:  # the event brought nothing to mind
            continue
        draws += len(before["nodes"])  # one 53-bit draw, one block, per node held
        added += 1
        assert after["wm_counter"] == added
        assert after["rng_draws"] == draws
        new_id = wm_id(seed, added - 1)
        assert all(n["node_id"] != new_id for n in before["nodes"])


def test_brainstate_events_that_bring_nothing_to_mind_leave_it_unchanged() -> None:
    config = BrainStateConfig()
    state = initial_brainstate(config)
    for event in (
        StageTransition(to_stage="act"),
        SemRead(iteration=0, key="a/b/c/d", exists=False),
        SemWrite(iteration=0, key="a/b/c/d", value=1, status="failed"),
        _agent_output("math_agent", "failed"),
        _agent_output("profile_agent", "declined"),
    ):
        assert apply_brainstate(state, event, "s") is state


def test_brainstate_new_node_has_the_salience_of_its_kind() -> None:
    state = apply_brainstate(
        initial_brainstate(BrainStateConfig()), InputReceived(iteration=0, text="hi", user="u"), "s"
    )
    assert state["nodes"] == [
        {"node_id": wm_id("s", 0), "kind": "percept", "label": "hi", "apt": 1.0}
    ]
    assert state["rng_draws"] == 0


@given(CONFIGS, EVENT_LISTS)
def test_brainstate_node_ids_come_from_the_seed(
    config: BrainStateConfig, events: list[RunEvent]
) -> None:
    one = {n["node_id"] for n in fold_brainstate(config, events, "seed-1")["nodes"]}
    two = {n["node_id"] for n in fold_brainstate(config, events, "seed-2")["nodes"]}
    configured = {n.node_id for n in config.working_memory.nodes}
    assert (one - configured).isdisjoint(two - configured)


# SelfRepresentation

SELFREP = SelfRepConfig(
    agents={
        "math_agent": AgentProfile(),
        "profile_agent": AgentProfile(status="degraded"),
        "generic_agent": AgentProfile(status="unavailable"),
    }
)


@given(st.lists(st.tuples(AGENT_NAMES, STATUSES), max_size=30))
def test_selfrep_counts_calls_and_failures(calls: list[tuple[str, str]]) -> None:
    events: list[RunEvent] = [_agent_output(agent, status) for agent, status in calls]
    events.insert(len(events) // 2, StageTransition(to_stage="act"))  # ignored
    state = fold_selfrep(SELFREP, events)
    initial = initial_selfrep(SELFREP)["agents"]
    for name, agent in state["agents"].items():
        failures = sum(1 for a, s in calls if a == name and s == "failed")
        assert agent["calls"] == sum(1 for a, _ in calls if a == name)
        assert agent["failures"] == failures
        if failures:
            expected_status = "degraded"
        else:
            expected_status = initial.get(name, {"status": "unavailable"})["status"]
        assert agent["status"] == expected_status
    assert set(state["agents"]) == set(initial) | {a for a, _ in calls}
    assert list(state["agents"]) == sorted(state["agents"])


def test_selfrep_initial_state_follows_the_snapshot() -> None:
    assert initial_selfrep(SELFREP) == {
        "name": "MACE",
        "stage": 0,
        "agents": {
            "generic_agent": {"status": "unavailable", "calls": 0, "failures": 0},
            "math_agent": {"status": "available", "calls": 0, "failures": 0},
            "profile_agent": {"status": "degraded", "calls": 0, "failures": 0},
        },
    }
    assert available_agents(initial_selfrep(SELFREP)) == {"math_agent"}


def test_selfrep_failure_makes_an_agent_unavailable_to_the_router() -> None:
    state = apply_selfrep(initial_selfrep(SELFREP), _agent_output("math_agent", "failed"))
    assert available_agents(state) == frozenset()
