"""The ledger's newest signed checkpoint, and the public key that checks it, for witnesses.

Both are facts of the whole store, not of the caller's tenant: the checkpoint's size and last
notification id move with every tenant's writes, which `/readyz` keeps from anyone without a
role that answers for the store. So both go to ``admin`` and ``auditor`` tokens: the auditor is
who takes a checkpoint elsewhere as a witness and checks bundles against the key, and an admin
runs the service. The public key is no secret, but it is handed out by whoever runs the ledger,
to the same people, so that a witness knows whose key it pins.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from domain.governance import Role
from infrastructure.api.context import Caller, Ctx, Service, require
from infrastructure.api.errors import documented, not_found
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.keys.checkpoint_key import CheckpointKey

router = APIRouter(prefix="/v1/checkpoints", tags=["checkpoints"])
READERS: Final = (Role.ADMIN, Role.AUDITOR)
PEM_TYPE: Final = "application/x-pem-file"
EXPORTED: Final = {
    "type": "object",
    "required": ["algorithm", "key_id", "checkpoint", "signature"],
    "properties": {
        "algorithm": {"type": "string", "const": "ed25519"},
        "key_id": {"type": "string"},
        "checkpoint": {
            "type": "object",
            "description": "number, tree_size, root, last_notification_id, previous, heads_root,"
            " peaks, written_at: the signed body, as canonical JSON",
        },
        "signature": {"type": "string", "description": "base64 Ed25519 signature of the body"},
    },
}
PUBLIC_KEY: Final = {
    "type": "object",
    "required": ["key_id", "public_key"],
    "properties": {"key_id": {"type": "string"}, "public_key": {"type": "string"}},
}


def _checkpoints(ctx: Service) -> Checkpoints:
    checkpoints = ctx.ledger.store.checkpoints
    assert checkpoints is not None  # a store opened from settings has its checkpoint key
    return checkpoints


@router.get(
    "/newest",
    summary="the newest checkpoint, signature and chain position checked, in the export format",
    description="The export format `{algorithm, key_id, checkpoint, signature}`: keep it"
    " elsewhere as a witness. "
    "Roles: admin, auditor.",
    responses={
        200: {"content": {"application/json": {"schema": EXPORTED}}},
        **documented((404, "no checkpoint has been written yet (NOT_FOUND)")),
    },
)
def newest_checkpoint(ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *READERS)
    newest = _checkpoints(ctx).newest()
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
        200: {
            "content": {
                "application/json": {"schema": PUBLIC_KEY},
                PEM_TYPE: {"schema": {"type": "string"}},
            }
        }
    },
)
def public_key(request: Request, ctx: Ctx, who: Caller) -> Response | dict[str, Any]:
    require(who, *READERS)
    key: CheckpointKey = _checkpoints(ctx).key
    if PEM_TYPE in request.headers.get("accept", ""):
        return PlainTextResponse(key.public_pem(), media_type=PEM_TYPE)
    return {"key_id": key.key_id, "public_key": key.public_pem()}
