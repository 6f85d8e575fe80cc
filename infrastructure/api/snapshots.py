"""Declared snapshots: store one (content-addressed, so storing it twice is harmless), read one.

Snapshots are shared by every tenant: the same content has the same id, wherever it came from.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from domain.canonical import CanonicalJSONError
from domain.errors import InvalidInput, NotFoundError
from domain.governance import Role
from domain.stage0.config import UnusableSnapshot, declare_usable
from infrastructure.api.bodies import SnapshotDeclaration
from infrastructure.api.context import Caller, Ctx, SnapshotIdPath, require
from infrastructure.api.errors import invalid, not_found
from infrastructure.api.response_models.snapshots import SnapshotShown, SnapshotStored
from infrastructure.api.responses import CanonicalJSONResponse, answers

router = APIRouter(prefix="/v1/snapshots", tags=["snapshots"])


@router.post(
    "",
    status_code=201,
    summary="store a snapshot (200 when it was stored already)",
    responses={
        201: {"model": SnapshotStored, "description": "stored"},
        200: {"model": SnapshotStored, "description": "stored already: nothing was written"},
    },
)
def put_snapshot(body: SnapshotDeclaration, ctx: Ctx, who: Caller) -> Response:
    require(who, Role.OPERATOR, Role.ADMIN)
    try:
        declared = declare_usable(
            body.kind.value, body.payload, body.schema_version, body.seed_namespace
        )
    except UnusableSnapshot as exc:
        raise invalid(str(exc), "body.payload") from None
    except (ValueError, CanonicalJSONError) as exc:
        raise invalid(str(exc)) from None
    snapshot, created = ctx.ledger.snapshots.put(declared)
    content = {"snapshot_id": snapshot.snapshot_id, "kind": snapshot.kind, "created": created}
    return CanonicalJSONResponse(content, status_code=201 if created else 200)


@router.get(
    "/{snapshot_id}",
    summary="a stored snapshot, its content address verified",
    response_model=None,
    responses=answers(SnapshotShown),
)
def get_snapshot(snapshot_id: SnapshotIdPath, ctx: Ctx, who: Caller) -> dict[str, Any]:
    try:
        return ctx.reader.snapshots.get(snapshot_id).as_json()
    except NotFoundError:
        raise not_found(f"snapshot {snapshot_id}") from None
    except InvalidInput as exc:
        raise invalid(str(exc), "path.snapshot_id") from None
