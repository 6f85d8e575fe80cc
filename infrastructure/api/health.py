"""``/healthz`` (the process answers) and ``/readyz`` (the store answers and holds our keys).

Ready means the store answers and no configured key contradicts it: a key whose secret is not the
one the store was signed with (`infrastructure.key_checks`) makes the service not ready, and every
write it tries is refused with 503 ``KEY_MISMATCH``.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import PersistenceError
from fastapi import APIRouter

from infrastructure.api.context import Ctx
from infrastructure.api.errors import ApiError, HttpCode
from infrastructure.key_checks import KeyMismatch, KeyStatus
from infrastructure.signed_record import IntegrityFailure

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="the process is up")
def healthz() -> dict[str, Any]:
    return {"status": "ok"}


@router.get("/readyz", summary="the store is reachable and holds the service's signing keys")
def readyz(ctx: Ctx) -> dict[str, Any]:
    try:
        position = ctx.ledger.recorder.max_notification_id() or 0
        keys = ctx.ledger.key_checks.status()
    except (PersistenceError, OSError) as exc:
        raise ApiError(503, HttpCode.NOT_READY, f"store unreachable: {exc}") from None
    except IntegrityFailure as exc:
        raise ApiError(503, HttpCode.NOT_READY, str(exc)) from None
    keyring = ctx.ledger.keyring
    if not keyring.key_ids:
        raise ApiError(503, HttpCode.NOT_READY, "no signing keys loaded")
    for key_id, status in sorted(keys.items()):
        if status is KeyStatus.MISMATCH:
            raise ApiError(503, HttpCode.NOT_READY, str(KeyMismatch(keyring, key_id)))
    return {
        "status": "ready",
        "store": ctx.ledger.store.describe(),
        "log_position": position,
        "active_key_id": keyring.active_key_id,
        "keys": {key_id: status.value for key_id, status in sorted(keys.items())},
        "tokens": len(ctx.tokens),
    }
