"""Agent code that `mace reexecute --agent` loads and that does not do what the recording did."""

from __future__ import annotations

from typing import Any

from support.ticket_agent import agent


def raises(harness: Any, question: str) -> Any:
    """Code that fails before its first call, where the recorded run went on."""
    raise RuntimeError("the agent broke")


def takes_one(harness: Any) -> Any:
    """Not the shape `mace reexecute` calls: (harness, input)."""
    return None


class _SearchesThree:
    """The ticket agent's boundary after a code change: every tool call also asks for a limit."""

    def __init__(self, harness: Any) -> None:
        self.harness = harness

    def model_call(self, model_id: str, prompt: Any) -> Any:
        return self.harness.model_call(model_id, prompt)

    def tool_call(self, name: str, arguments: Any) -> Any:
        return self.harness.tool_call(name, {**arguments, "limit": 3})

    def retrieve(self, query: str) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self.harness.retrieve(query)
        return answer


def ticket_agent_changed(harness: Any, ticket: str) -> Any:
    """`support.ticket_agent` after a change that calls its tools with other arguments."""
    return agent(_SearchesThree(harness), ticket)
