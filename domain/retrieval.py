"""Retrievals served from the ledger's own tenant memories (seed 003: exact replay = retrieval +
events), so that replay can serve them again and compare.

A `RetrievalRequest` that names ``memory_position`` was served from the tenant's memory log as it
stood at that position, by `assemble_context` (no policy bundle: a retrieval is what matched, a
context what a bundle let through). Its hits are the ranked entries: ``uri``
``mace://<tenant>/memory/<memory_id>``, ``score`` the number of query terms the memory holds, and
``explain`` its ``rank`` and log ``position``. Scores are compared within `SCORE_EPSILON`, the
canonical serializer's own resolution, so a score an emitter wrote as a float still matches.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from domain.canonical import NUMERIC_EPSILON
from domain.context_assembly import ContextCaller, ContextRequest, assemble_context
from domain.memories import Memory

SCORE_EPSILON: Final = NUMERIC_EPSILON
EXPLAINED: Final = ("rank", "position")
"""The explain fields a ledger retrieval gives each hit, and replay compares."""
_RETRIEVER: Final = ContextCaller("retrieval", ())
_MEMORY_URI: Final = re.compile(r"mace://[^/]+/memory/[^/]+")


def memory_uri(tenant: str, memory_id: str) -> str:
    return f"mace://{tenant}/memory/{memory_id}"


def ledger_hits(
    tenant: str, memories: Sequence[Memory], query: str, max_entries: int
) -> list[dict[str, Any]]:
    """The hits the ledger's retrieval gives ``query`` over ``memories``, best first."""
    context = assemble_context(memories, ContextRequest(query, max_entries), _RETRIEVER, None)
    return [
        {
            "uri": memory_uri(tenant, entry["memory_id"]),
            "score": float(entry["score"]),
            "explain": {"rank": entry["rank"], "position": entry["position"]},
        }
        for entry in context.entries
    ]


def names_a_memory(uri: str) -> bool:
    """Whether ``uri`` has the shape of a ledger memory's (`memory_uri`, any tenant's)."""
    return _MEMORY_URI.fullmatch(uri) is not None


def memory_of(tenant: str, uri: str) -> str | None:
    """The memory id a hit's ``uri`` names among the tenant's memories (None: it names none)."""
    prefix = memory_uri(tenant, "")
    return uri.removeprefix(prefix) if uri.startswith(prefix) else None


def same_hits(recorded: Sequence[dict[str, Any]], replayed: Sequence[dict[str, Any]]) -> bool:
    """The same hits in the same order, scores within `SCORE_EPSILON`, the same explained
    fields (an emitter may explain more; those are taken as recorded)."""
    if [h["uri"] for h in recorded] != [h["uri"] for h in replayed]:
        return False
    return all(
        abs(was["score"] - now["score"]) <= SCORE_EPSILON
        and all(was["explain"].get(name) == now["explain"][name] for name in EXPLAINED)
        for was, now in zip(recorded, replayed, strict=True)
    )
