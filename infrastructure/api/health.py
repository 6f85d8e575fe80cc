"""``/healthz`` (the process answers) and ``/readyz`` (the store answers and keys are loaded)."""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import PersistenceError
from fastapi import APIRouter

from infrastructure.api.context import Ctx
from infrastructure.api.errors import ApiError, HttpCode

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="the process is up")
def healthz() -> dict[str, Any]:
    return {"status": "ok"}


@router.get("/readyz", summary="the store is reachable and signing keys are loaded")
def readyz(ctx: Ctx) -> dict[str, Any]:
    try:
        position = ctx.ledger.recorder.max_notification_id() or 0
    except (PersistenceError, OSError) as exc:
        raise ApiError(503, HttpCode.NOT_READY, f"store unreachable: {exc}") from None
    keyring = ctx.ledger.keyring
    if not keyring.key_ids:
        raise ApiError(503, HttpCode.NOT_READY, "no signing keys loaded")
    return {
        "status": "ready",
        "store": ctx.ledger.store.describe(),
        "log_position": position,
        "active_key_id": keyring.active_key_id,
        "tokens": len(ctx.tokens),
    }
