"""The BrainState reducer: a small working memory that every decision-relevant event touches.

Each event that brings something to mind (the input, the route taken, a fact read or written, an
agent's or model's output) adds a node with a salience (``apt``). Before it is added, every node
already held decays by the snapshot's factor plus a jitter drawn from the job's seeded RNG
(stream ``brainstate``); apts are rounded as the canonical serializer rounds them. Nodes are kept
sorted by ``(apt desc, node_id asc)`` and cut to the snapshot's capacity. The state carries how
many RNG blocks it has drawn, so folding is a pure function of the snapshot, the ordered events
and the seed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from domain.canonical import canonical_float
from domain.determinism import DeterministicRNG, Seed, wm_id
from domain.events import (
    AgentOutput,
    InputReceived,
    ModelCallEnvelope,
    RetrievalResponse,
    RouterDecision,
    RunEvent,
    SemRead,
    SemWrite,
    ToolResult,
)
from domain.stage0.config import BrainStateConfig, node_order

RNG_STREAM: Final = "brainstate"
SALIENCE: Final[dict[str, float]] = {
    "percept": 1.0,
    "fact": 0.8,
    "retrieval": 0.75,
    "output": 0.7,
    "route": 0.6,
}


def initial_brainstate(config: BrainStateConfig) -> dict[str, Any]:
    memory = config.working_memory
    nodes = sorted((n.model_dump() for n in memory.nodes), key=node_order)
    return {
        "capacity": memory.capacity,
        "decay": memory.decay,
        "jitter": memory.jitter,
        "nodes": nodes[: memory.capacity],
        "wm_counter": 0,
        "rng_draws": 0,
    }


def _brought_to_mind(event: RunEvent) -> tuple[str, str] | None:
    """The ``(kind, label)`` of the node an event adds, if it adds one."""
    added: tuple[str, str] | None = None
    match event:
        case InputReceived():
            added = ("percept", event.text[:80])
        case RouterDecision():
            added = ("route", event.agent)
        case SemRead(exists=True) | SemWrite(status="written"):
            added = ("fact", event.key)
        case AgentOutput(status="ok"):
            added = ("output", event.agent)
        case ModelCallEnvelope() | ToolResult():
            added = ("output", event.call_id)
        case RetrievalResponse():
            added = ("retrieval", event.request_id)
    return added


def apply_brainstate(state: dict[str, Any], event: RunEvent, job_seed: Seed) -> dict[str, Any]:
    added = _brought_to_mind(event)
    if added is None:
        return state
    kind, label = added
    rng = DeterministicRNG(job_seed, RNG_STREAM, start=state["rng_draws"])
    nodes = []
    for node in state["nodes"]:
        jitter = state["jitter"] * (2 * rng.random() - 1)
        apt = min(1.0, max(0.0, canonical_float(node["apt"] * state["decay"] + jitter)))
        nodes.append({**node, "apt": apt})
    nodes.append(
        {
            "node_id": wm_id(job_seed, state["wm_counter"]),
            "kind": kind,
            "label": label,
            "apt": SALIENCE[kind],
        }
    )
    nodes.sort(key=node_order)
    return {
        **state,
        "nodes": nodes[: state["capacity"]],
        "wm_counter": state["wm_counter"] + 1,
        "rng_draws": rng.draws,
    }


def fold_brainstate(
    config: BrainStateConfig, events: Iterable[RunEvent], job_seed: Seed
) -> dict[str, Any]:
    state = initial_brainstate(config)
    for event in events:
        state = apply_brainstate(state, event, job_seed)
    return state
