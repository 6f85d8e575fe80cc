"""The replay steps a test expects by name, where more than one test spells them out."""

from __future__ import annotations

EVENTS_COMPARED = ("InputReceived", "RouterDecision", "AgentOutput", "SemRead", "SemWrite", "order")
"""A re-run iteration's own events, compared after its trace: type by type, then their order."""


def event_steps(iteration: int) -> list[str]:
    return [f"8 iteration {iteration}: events.{name}" for name in EVENTS_COMPARED]
