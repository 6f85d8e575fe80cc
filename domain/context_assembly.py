"""`assemble_context`: the one path from memories, a request and a policy bundle to a context.

Emission and receipt replay both call it (seed 001); only its inputs differ. It is a pure function:

1. **Select.** A memory is a candidate when it shares a term with the query. Terms are the
   case-folded ``\\w+`` runs of the query and of the memory's text (a fact's key and canonical
   value, an episode's text). The score is the number of distinct query terms it holds.
2. **Rank.** Higher score first, then the later memory log position, then the id: a total order,
   so the same memories always rank the same.
3. **Apply the bundle**, walking candidates in rank order until ``max_entries`` are kept: the
   first matching rule decides; ``deny`` drops the memory, ``redact`` keeps it with its content
   replaced. Each decision is recorded in ``filters_applied`` as ``(rule_id, memory_id, action)``.
4. **Hash.** ``context_hash`` is the SHA-256 of the canonical JSON of the kept entries, in order:
   what the agent is handed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from domain.canonical import canonical_json, digest
from domain.errors import InvalidInput
from domain.memories import Memory
from domain.policy import Action, PolicyBundle, Subject

REDACTED: Final = "[REDACTED]"
MAX_QUERY_CHARS: Final = 2000
MAX_ENTRIES_LIMIT: Final = 100
_TERM: Final = re.compile(r"\w+")


class ContextRequestError(InvalidInput):
    """A context request that cannot be assembled; the message names the field."""


@dataclass(frozen=True, slots=True)
class ContextRequest:
    query: str
    max_entries: int = 10

    def __post_init__(self) -> None:
        if not self.query.strip() or len(self.query) > MAX_QUERY_CHARS:
            msg = f"query: expected 1-{MAX_QUERY_CHARS} characters with at least one word"
            raise ContextRequestError(msg)
        if not _TERM.search(self.query):
            raise ContextRequestError("query: expected at least one word to match memories by")
        if isinstance(self.max_entries, bool) or not 1 <= self.max_entries <= MAX_ENTRIES_LIMIT:
            msg = f"max_entries: expected an integer from 1 to {MAX_ENTRIES_LIMIT}"
            raise ContextRequestError(msg)

    def as_json(self) -> dict[str, Any]:
        return {"query": self.query, "max_entries": self.max_entries}


@dataclass(frozen=True, slots=True)
class ContextCaller:
    """Who the context is assembled for: the subject of ``caller*`` predicates."""

    caller_id: str
    roles: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"id": self.caller_id, "roles": sorted(self.roles)}


@dataclass(frozen=True, slots=True)
class AssembledContext:
    entries: list[dict[str, Any]]
    filters_applied: list[dict[str, str]]
    context_hash: str


def terms(text: str) -> frozenset[str]:
    return frozenset(_TERM.findall(text.casefold()))


def _memory_text(memory: Memory) -> str:
    if memory.key is None:
        return str(memory.content)
    return f"{memory.key.replace('/', ' ')} {canonical_json(memory.content).decode()}"


def assemble_context(
    memories: Sequence[Memory],
    request: ContextRequest,
    caller: ContextCaller,
    bundle: PolicyBundle | None,
) -> AssembledContext:
    wanted = terms(request.query)
    scored = [(len(wanted & terms(_memory_text(m))), m) for m in memories]
    ranked = sorted(
        ((score, m) for score, m in scored if score > 0),
        key=lambda pair: (-pair[0], -pair[1].position, pair[1].memory_id),
    )
    roles = frozenset(caller.roles)
    entries: list[dict[str, Any]] = []
    filters: list[dict[str, str]] = []
    for score, memory in ranked:
        if len(entries) == request.max_entries:
            break
        rule = None
        if bundle is not None:
            subject = Subject(memory.kind.value, frozenset(memory.labels), caller.caller_id, roles)
            rule = bundle.decide(subject)
        if rule is not None:
            filters.append(
                {
                    "rule_id": rule.rule_id,
                    "memory_id": memory.memory_id,
                    "action": rule.action.value,
                }
            )
            if rule.action is Action.DENY:
                continue
        redacted = rule is not None and rule.action is Action.REDACT
        entries.append(
            {
                "memory_id": memory.memory_id,
                "kind": memory.kind.value,
                "key": memory.key,
                "content": REDACTED if redacted else memory.content,
                "labels": list(memory.labels),
                "redacted": redacted,
                "score": score,
                "rank": len(entries) + 1,
                "position": memory.position,
            }
        )
    return AssembledContext(entries, filters, digest(entries))
