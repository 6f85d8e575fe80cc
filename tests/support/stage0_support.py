"""What the pure Stage-0 tests share: the seed 004 text and a SEM held in a dict.

Tests that compare our constants with the specification read ``tests/spec/``, a verbatim copy of
the Stage-0 rulebook (seed 004), so they run wherever the repository is cloned.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from domain.job import DEFAULT_TENANT
from domain.sem import SemEntry

SEED_004 = Path(__file__).resolve().parent / "spec" / "004_b33ece0496ab8fac.txt"


def seed_004_text() -> str:
    """Seed 004, verbatim."""
    return SEED_004.read_text(encoding="utf-8")


def quoted_sentences(text: str) -> list[str]:
    """Everything the seed writes between typographic quotes “ and ”."""
    return re.findall("\u201c(.*?)\u201d", text)


def fact(key: str, *values: Any) -> SemEntry:
    """A SEM entry under ``key`` that was written each of ``values`` in turn."""
    first, *rest = values
    entry = SemEntry.first_write(DEFAULT_TENANT, key, first, source="test")
    for value in rest:
        entry.write(value, source="test")
    return entry


class InMemorySem:
    """A `SemSource` over a dict ``key -> SemEntry``; it hands out copies, as a store does."""

    tenant = DEFAULT_TENANT

    def __init__(self, *entries: SemEntry) -> None:
        self.entries: dict[str, SemEntry] = {entry.key: entry for entry in entries}

    def entry(self, key: str) -> SemEntry | None:
        found = self.entries.get(key)
        return None if found is None else copy.deepcopy(found)


SEED_003_TYPES = (  # seed 003, Run Event Schema v1
    "StageTransition",
    "PolicySnapshotRef",
    "RetrievalRequest",
    "RetrievalResponse",
    "ToolCall",
    "ToolResult",
    "PatchApply",
    "GateDecision",
    "ErrorEvent",
    "BranchMerged",
    "CapsuleExported",
    "CapsuleImported",
    "ModelCallEnvelope",
)
