"""Retrieval receipts over HTTP (seed 001): assemble a context or a handoff, each answered with
its signed receipt; list, read, verify and replay the tenant's receipts.

A receipt of another tenant is answered exactly as one that does not exist. A replay that cannot
be done answers 422 with the seed's own ``unreplayable.*`` code (mapped in ``app``). A context or
handoff whose receipt the store refuses is still answered 200 (fail-open, seed 001), unsigned and
with a ``warning``; see `ReceiptService._record`. Personal data in a receipt (memories kept from
before memory writes refused it) is shown in full to an admin token only; every other caller gets
``[REDACTED:pii]`` in its place and ``redacted: true`` (`ReceiptService`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import AfterValidator

from domain.context_assembly import ContextCaller, ContextRequest
from domain.errors import InvalidInput
from domain.receipt import RECEIPT_ID_PATTERN, MemoryView, ReceiptKind, handoff_of
from infrastructure.api.bodies import ContextAsk, HandoffAsk
from infrastructure.api.context import Caller, Ctx, Service
from infrastructure.api.errors import ApiError, invalid
from infrastructure.api.response_models.receipts import (
    AssembledReceipt,
    ReceiptListing,
    ReceiptReplayed,
    ReceiptVerdict,
    SignedReceipt,
)
from infrastructure.api.responses import answers
from infrastructure.application.receipts import LIST_LIMIT, Assembly
from infrastructure.application.tokens import Principal

router = APIRouter(tags=["receipts"])
NO_RECEIPT = (404, "no such receipt for this tenant (NOT_FOUND)")
UNWRITTEN = (
    "If the receipt cannot be written, the context is still answered (fail-open): receipt_id,"
    " the body's signature and signature are null and a warning says so."
)


def check_receipt_id(receipt_id: str) -> str:
    if not RECEIPT_ID_PATTERN.fullmatch(receipt_id):
        msg = f"invalid receipt id {receipt_id!r}: expected rct- and 32 lowercase hex digits"
        raise InvalidInput(msg)
    return receipt_id


# The schema documents the pattern; the check gives the message.
ReceiptIdPath = Annotated[
    str,
    Path(json_schema_extra={"pattern": RECEIPT_ID_PATTERN.pattern}),
    AfterValidator(check_receipt_id),
]
ParentQuery = Annotated[
    str | None,
    Query(
        description="only the replays of this receipt",
        json_schema_extra={"pattern": RECEIPT_ID_PATTERN.pattern},
    ),
    AfterValidator(lambda rid: None if rid is None else check_receipt_id(rid)),
]


def _refused(exc: InvalidInput) -> ApiError:
    """422 for a request the domain refused; its message begins with the field it is about."""
    name = str(exc).split(":", 1)[0]
    return invalid(str(exc), f"body.{name}" if name.isidentifier() else None)


def _emit(
    ctx: Service, who: Principal, kind: ReceiptKind, ask: ContextAsk, handoff: Any
) -> dict[str, Any]:
    try:
        request = ContextRequest(ask.query, ask.max_entries)
    except InvalidInput as exc:
        raise _refused(exc) from None
    caller = ContextCaller(who.actor.actor_id, who.actor.roles)
    return ctx.ledger.receipts.emit(Assembly(kind, who.tenant, caller, request, handoff))


@router.post(
    "/v1/context",
    summary="assemble a context for the caller under the bundle in force; its signed receipt",
    description=UNWRITTEN,
    response_model=None,
    responses=answers(
        AssembledReceipt, (422, "a bad query or max_entries; field names it; nothing is written")
    ),
)
def context(body: ContextAsk, ctx: Ctx, who: Caller) -> dict[str, Any]:
    return _emit(ctx, who, ReceiptKind.CONTEXT, body, None)


@router.post(
    "/v1/handoff",
    summary="assemble the context handed to another agent; its signed receipt",
    description=UNWRITTEN,
    response_model=None,
    responses=answers(
        AssembledReceipt, (422, "a bad query, agent id or note; field names it; nothing is written")
    ),
)
def handoff(body: HandoffAsk, ctx: Ctx, who: Caller) -> dict[str, Any]:
    try:
        handed = handoff_of(body.to_agent, body.from_agent, body.note)
    except InvalidInput as exc:
        raise _refused(exc) from None
    return _emit(ctx, who, ReceiptKind.HANDOFF, body, handed)


@router.get(
    "/v1/receipts",
    summary="the tenant's receipts in emission order, numbered; ?parent= keeps its replays",
    response_model=None,
    responses=answers(ReceiptListing, (422, "a bad parent id, after or limit; field names it")),
)
def list_receipts(
    ctx: Ctx,
    who: Caller,
    parent: ParentQuery = None,
    after: Annotated[int, Query(ge=-1, le=2**31, description="rows numbered above this")] = -1,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT)] = 100,
) -> dict[str, Any]:
    return {"receipts": ctx.ledger.receipts.listing(who.tenant, parent, after, limit)}


@router.get(
    "/v1/receipts/{receipt_id}",
    summary="a receipt and its signature; personal data in full to admins only",
    response_model=None,
    responses=answers(
        SignedReceipt, NO_RECEIPT, (500, "the stored receipt was altered (INTEGRITY_FAILURE)")
    ),
)
def get_receipt(receipt_id: ReceiptIdPath, ctx: Ctx, who: Caller) -> dict[str, Any]:
    return ctx.reader.receipts.get(receipt_id, who.tenant, who.actor)


@router.get(
    "/v1/receipts/{receipt_id}/verify",
    summary="check a receipt's signature: valid true, false or null (cannot be checked here)",
    response_model=None,
    responses=answers(ReceiptVerdict, NO_RECEIPT),
)
def verify_receipt(receipt_id: ReceiptIdPath, ctx: Ctx, who: Caller) -> dict[str, Any]:
    return ctx.reader.receipts.verify(receipt_id, who.tenant).as_json()


@router.post(
    "/v1/receipts/{receipt_id}/replay",
    summary="re-run a receipt's assembly under its frozen bundle; the diff envelope",
    response_model=None,
    responses=answers(
        ReceiptReplayed,
        (403, "the caller is not an auditor, admin or council member"),
        NO_RECEIPT,
        (
            422,
            "the receipt cannot be replayed (error.code: unreplayable.missing_policy_snapshot,"
            " unreplayable.nested_replay or unreplayable.invalid_snapshot), or a bad memory view",
        ),
    ),
)
def replay_receipt(
    receipt_id: ReceiptIdPath,
    ctx: Ctx,
    who: Caller,
    memory: Annotated[
        MemoryView, Query(description="the memories now (default) or as the receipt saw them")
    ] = MemoryView.CURRENT,
) -> dict[str, Any]:
    return ctx.ledger.receipts.replay(receipt_id, who.tenant, who.actor, memory)
