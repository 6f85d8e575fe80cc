"""A tenant's memories over HTTP: remember a fact or an episode, list the live ones, forget one.

The writer recorded in a memory's provenance is always the token's actor, never a body field. A
memory of another tenant is answered exactly as one that does not exist.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, Path
from pydantic import AfterValidator

from domain.errors import InvalidInput
from domain.governance import Role
from infrastructure.api.bodies import FactMemory, ForgetAsk, MemoryWrite
from infrastructure.api.context import Caller, Ctx, require
from infrastructure.api.errors import invalid, not_found
from infrastructure.api.response_models.memories import LiveMemories, MemoryForgotten, MemoryShown
from infrastructure.api.responses import answers

router = APIRouter(prefix="/v1/memories", tags=["memories"])
WRITERS: Final = (Role.OPERATOR, Role.ADMIN)
MEMORY_ID_PATTERN: Final = re.compile(r"^(mem|epi)-[0-9a-f]{32}$")


def check_memory_id(memory_id: str) -> str:
    if not MEMORY_ID_PATTERN.fullmatch(memory_id):
        msg = f"invalid memory id {memory_id!r}: expected mem- or epi- and 32 lowercase hex digits"
        raise InvalidInput(msg)
    return memory_id


MemoryIdPath = Annotated[
    str,
    Path(json_schema_extra={"pattern": MEMORY_ID_PATTERN.pattern}),
    # The schema documents the pattern; this check gives the message.
    AfterValidator(check_memory_id),
]


@router.post(
    "",
    status_code=201,
    summary="remember a fact (under a SEM key) or an episode, with labels and its origin",
    response_model=None,
    responses=answers(
        MemoryShown,
        (403, "the caller is neither operator nor admin"),
        (422, "a bad key, value, label or text; field names it; nothing is written"),
        status=201,
    ),
)
def remember(body: Annotated[MemoryWrite, Body()], ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *WRITERS)
    memories = ctx.ledger.memories
    if isinstance(body, FactMemory):
        memory = memories.remember_fact(
            who.tenant, body.key, body.value, body.labels, who.actor, body.origin
        )
    else:
        memory = memories.remember_episode(
            who.tenant, body.text, body.labels, who.actor, body.origin
        )
    return memory.as_json()


@router.get(
    "",
    summary="the tenant's live memories in write order, and the log position; personal data"
    " kept before writes refused it in full only to an admin",
    response_model=None,
    responses=answers(LiveMemories),
)
def list_memories(ctx: Ctx, who: Caller) -> dict[str, Any]:
    return ctx.reader.memories.shown(who.tenant, who.actor)


@router.post(
    "/{memory_id}/forget",
    summary="tombstone a live memory: later assemblies no longer see it; receipts still name it",
    response_model=None,
    responses=answers(
        MemoryForgotten,
        (403, "the caller is neither operator nor admin"),
        (404, "no live memory with this id for this tenant (NOT_FOUND)"),
        (422, "a bad memory id or reason; field names it"),
    ),
)
def forget(memory_id: MemoryIdPath, body: ForgetAsk, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *WRITERS)
    try:
        ctx.ledger.memories.forget(who.tenant, memory_id, body.reason, who.actor)
    except LookupError:
        raise not_found(f"memory {memory_id}") from None
    except InvalidInput as exc:
        raise invalid(str(exc), "body.reason") from None
    return {"memory_id": memory_id, "forgotten": True}
