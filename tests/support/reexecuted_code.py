"""Agent code that `mace reexecute --agent` loads and that does not do what the recording did."""

from __future__ import annotations

from typing import Any


def raises(harness: Any, question: str) -> Any:
    """Code that fails before its first call, where the recorded run went on."""
    raise RuntimeError("the agent broke")


def takes_one(harness: Any) -> Any:
    """Not the shape `mace reexecute` calls: (harness, input)."""
    return None
