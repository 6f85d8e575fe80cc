"""The ledger's signed checkpoints, for witnesses and auditors: the newest, any by number, the
public key that checks them, a consistency proof between two, and a verification of the whole
ledger, against an exported checkpoint kept elsewhere when one is sent. The newest is also a C2SP
tlog-checkpoint signed note, with the verifier key that checks it (`domain.checkpoint_note`).

Checkpoints are facts of the whole store, not of the caller's tenant: their size and last
notification id move with every tenant's writes, which `/readyz` keeps from anyone without a
role that answers for the store. So every route goes to ``admin`` and ``auditor`` tokens: the
auditor is who takes a checkpoint elsewhere as a witness and checks bundles against the key, and
an admin runs the service. The public key is no secret, but it is handed out by whoever runs the
ledger, to the same people, so that a witness knows whose key it pins.

Writing a checkpoint is the notary's (`mace serve` keeps the store checkpointed), never a
request's. Proofs and verification read ``MACE_READ_STORE`` when it is set (`Service.reader`).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import ConfigDict, Field

from domain.checkpoint import SignedCheckpoint
from domain.errors import MaceError
from domain.governance import Role
from infrastructure.api.bodies import Body
from infrastructure.api.context import Caller, Ctx, Service, require
from infrastructure.api.errors import documented, invalid, not_found
from infrastructure.api.response_models.checkpoints import (
    CheckpointPublicKey,
    CheckpointVerifierKey,
    ConsistencyProof,
    ExportedCheckpoint,
    LedgerVerdict,
)
from infrastructure.api.responses import answers
from infrastructure.application.checkpoints import CheckpointService, Consistency
from infrastructure.application.tokens import Principal

router = APIRouter(prefix="/v1/checkpoints", tags=["checkpoints"])
READERS: Final = (Role.ADMIN, Role.AUDITOR)
PEM_TYPE: Final = "application/x-pem-file"
NOTE_TYPE: Final = "text/plain"  # starlette adds "; charset=utf-8"
WITNESS: Final = "the witness in the request body"


class WitnessCheckpoint(ExportedCheckpoint):
    """An exported checkpoint sent as a witness: read in the export format; fields beyond it
    are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")


class WitnessAsk(Body):
    witness: WitnessCheckpoint | None = Field(
        default=None,
        description="a checkpoint exported earlier: the ledger must extend it (not rolled back,"
        " truncated or rewritten since)",
    )


def _signed(exported: WitnessCheckpoint) -> SignedCheckpoint:
    try:
        signature = base64.b64decode(exported.signature, validate=True)
    except (binascii.Error, ValueError):
        raise invalid("signature is not base64", "body.witness.signature") from None
    return SignedCheckpoint(exported.checkpoint, exported.key_id, signature)


def _checkpoints(ctx: Service, who: Principal) -> CheckpointService:
    require(who, *READERS)
    return ctx.ledger.checkpoints


@router.get(
    "/newest",
    response_model=None,
    summary="the newest checkpoint, signature and chain position checked, in the export format",
    description="Keep it elsewhere as a witness. Roles: admin, auditor.",
    responses=answers(ExportedCheckpoint, (404, "no checkpoint has been written yet (NOT_FOUND)")),
)
def newest_checkpoint(ctx: Ctx, who: Caller) -> dict[str, Any]:
    newest = _checkpoints(ctx, who).newest()
    if newest is None:
        raise not_found("checkpoint yet")
    return newest.exported()


@router.get(
    "/public-key",
    response_model=None,
    summary="the Ed25519 public key that checks the checkpoints",
    description=f"JSON `{{key_id, public_key}}`; the PEM alone with `Accept: {PEM_TYPE}`. "
    "Roles: admin, auditor.",
    responses={
        200: {"model": CheckpointPublicKey, "content": {PEM_TYPE: {"schema": {"type": "string"}}}}
    },
)
def public_key(request: Request, ctx: Ctx, who: Caller) -> Response | dict[str, Any]:
    key = _checkpoints(ctx, who).public_key
    if PEM_TYPE in request.headers.get("accept", ""):
        return PlainTextResponse(key.pem, media_type=PEM_TYPE)
    return {"key_id": key.key_id, "public_key": key.pem}


@router.get(
    "/newest/note",
    # A response class with no media type of its own: the document lists the note as text only.
    response_class=Response,
    response_model=None,
    summary="the newest checkpoint as a C2SP tlog-checkpoint signed note",
    description="Origin, tree size and base64 root, then the checkpoint key's signature line, as"
    " `mace checkpoint export --note` writes it; checks with `GET /v1/checkpoints/vkey` and any"
    " signed-note verifier. Roles: admin, auditor.",
    responses={
        200: {"content": {NOTE_TYPE: {"schema": {"type": "string"}}}},
        **documented((404, "no checkpoint has been written yet (NOT_FOUND)")),
    },
)
def newest_note(ctx: Ctx, who: Caller) -> Response:
    checkpoints = _checkpoints(ctx, who)
    newest = checkpoints.newest()
    if newest is None:
        raise not_found("checkpoint yet")
    note = checkpoints.note(newest, checkpoints.log_origin(ctx.settings.log_origin))
    return Response(note.encoded(), media_type=NOTE_TYPE)


@router.get(
    "/vkey",
    response_model=None,
    summary="the verifier key of the checkpoint notes, and the log's origin",
    description="`{origin, vkey}`, as `mace checkpoint public-key --vkey --json` prints it: the"
    " checkpoint key named by the origin (c2sp.org/signed-note). Roles: admin, auditor.",
    responses=answers(
        CheckpointVerifierKey,
        (422, "no checkpoint yet to make the origin from, and no MACE_LOG_ORIGIN (INVALID_INPUT)"),
    ),
)
def verifier_key(ctx: Ctx, who: Caller) -> dict[str, Any]:
    checkpoints = _checkpoints(ctx, who)
    origin = checkpoints.log_origin(ctx.settings.log_origin)
    return {"origin": origin, "vkey": checkpoints.verifier_key(origin).encoded()}


@router.get(
    "/consistency",
    response_model=None,
    summary="the proof that checkpoint `new`'s tree extends checkpoint `old`'s",
    description="Built from the store's log nodes and checked against both signed roots; `ok`"
    " false means the store no longer extends `old`. Roles: admin, auditor.",
    responses=answers(
        ConsistencyProof,
        (404, "no such checkpoint (NOT_FOUND)"),
        (422, "old is newer than new (INVALID_INPUT)"),
        (500, "a log node the proof needs is not stored (INTEGRITY_FAILURE)"),
    ),
)
def consistency_proof(
    ctx: Ctx,
    who: Caller,
    old: Annotated[int, Query(ge=1, description="the older checkpoint's number")],
    new: Annotated[int, Query(ge=1, description="the newer checkpoint's number")],
) -> dict[str, Any]:
    require(who, *READERS)
    proved: Consistency = ctx.reader.checkpoints.prove_numbers(old, new)
    return {
        "ok": proved.holds,
        "old": proved.old.summary(),
        "new": proved.new.summary(),
        "proof": [node.hex() for node in proved.proof],
    }


@router.post(
    "/verify",
    response_model=None,
    summary="verify the whole ledger, and that it extends the witness sent (if any)",
    description="Every checkpoint against the log it signed, every event's MAC, every stream's"
    " versions and seals; with `witness`, that the store extends that exported checkpoint."
    " A ledger that fails answers 200 with `ok` false and the failure's code and message, as"
    " `mace verify --all --json` does. Roles: admin, auditor.",
    responses=answers(
        LedgerVerdict, (422, "the witness is not an exported checkpoint (INVALID_INPUT)")
    ),
)
def verify_ledger(body: WitnessAsk, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *READERS)
    checkpoints = ctx.reader.checkpoints
    witness = None if body.witness is None else _signed(body.witness)
    try:
        kept = None
        if body.witness is not None and witness is not None:
            kept = checkpoints.verified(body.witness.algorithm, witness, WITNESS)
        audit = checkpoints.verify_ledger(kept, WITNESS)
    except MaceError as failed:
        return {"ok": False, "error_code": failed.code.value, "message": failed.message}
    return {"ok": True, "error_code": None, **audit.counts()}


@router.get(
    "/{number}",
    response_model=None,
    summary="checkpoint `number`, signature and chain position checked, in the export format",
    description="Roles: admin, auditor.",
    responses=answers(ExportedCheckpoint, (404, "no such checkpoint (NOT_FOUND)")),
)
def checkpoint_by_number(
    ctx: Ctx, who: Caller, number: Annotated[int, Path(ge=1, description="from 1")]
) -> dict[str, Any]:
    return _checkpoints(ctx, who).get(number).exported()
