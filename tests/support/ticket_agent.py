"""The agent the re-execution harness's tests re-execute (plain Python: a model call, two tool
calls, a retrieval). The same function runs against the in-process harness
(`tests/application/test_replay_harness.py`) and over HTTP (`tests/api/test_api_reexecutions.py`,
and `tests/api/test_reexecution_client.py` in a process of its own). It imports nothing of the
ledger: an agent's code does not."""

from __future__ import annotations

from typing import Any, Protocol


class Boundary(Protocol):
    """What the agent calls: its model, its tools and its retriever (live while it records,
    the harness when it is re-executed)."""

    def model_call(self, model_id: str, prompt: Any) -> Any: ...

    def tool_call(self, name: str, arguments: Any) -> Any: ...

    def retrieve(self, query: str) -> list[dict[str, Any]]: ...


def agent(boundary: Boundary, ticket: str) -> str:
    """The agent as it ran when it was recorded."""
    plan = boundary.model_call("m-small", {"role": "user", "content": f"plan for {ticket}"})
    found = boundary.tool_call("search", {"q": ticket})
    notes = boundary.retrieve(f"notes on {ticket}")
    page = boundary.tool_call("fetch", {"id": found["first"]})
    return f"{plan}: {page['title']} ({len(notes)} notes)"
