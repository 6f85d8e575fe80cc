"""The SelfRepresentation reducer: which agents the system has and how they are doing.

It starts from the job's ``selfrep`` snapshot and folds the job's ordered events. An agent whose
output failed is marked ``degraded`` (F4); the router then no longer hands it requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from domain.events import AgentOutput, RunEvent
from domain.stage0.config import SelfRepConfig


def initial_selfrep(config: SelfRepConfig) -> dict[str, Any]:
    return {
        "name": config.name,
        "stage": config.stage,
        "agents": {
            name: {"status": profile.status, "calls": 0, "failures": 0}
            for name, profile in sorted(config.agents.items())
        },
    }


def apply_selfrep(state: dict[str, Any], event: RunEvent) -> dict[str, Any]:
    if not isinstance(event, AgentOutput):
        return state
    agents = dict(state["agents"])
    agent = dict(agents.get(event.agent, {"status": "unavailable", "calls": 0, "failures": 0}))
    agent["calls"] += 1
    if event.status == "failed":
        agent["failures"] += 1
        agent["status"] = "degraded"
    agents[event.agent] = agent
    return {**state, "agents": dict(sorted(agents.items()))}


def fold_selfrep(config: SelfRepConfig, events: Iterable[RunEvent]) -> dict[str, Any]:
    state = initial_selfrep(config)
    for event in events:
        state = apply_selfrep(state, event)
    return state


def available_agents(state: dict[str, Any]) -> frozenset[str]:
    return frozenset(name for name, a in state["agents"].items() if a["status"] == "available")
