"""``/healthz`` (the process answers) and ``/readyz`` (it can serve: store, read store, keys and
tokens).

Ready means the store answers (else 503 ``STORE_UNAVAILABLE``, as every store route answers then,
within ``MACE_CONNECT_TIMEOUT``), it can take writes (not a read-only or standby PostgreSQL, not a
SQLite file, folder or disk that cannot: `StoreStatus.write_refusal`), no configured key
contradicts it (a key whose secret is not the one the store was signed with, `StoreStatus.keys`,
makes the service not ready, and every write it tries is refused with 503 ``KEY_MISMATCH``) and
the tokens file is usable.

Both answer without a token, and then say only whether: ``{"status": "ready"}`` or 503
``NOT_READY`` with the message ``not ready`` (``not ready: the store cannot take writes``), or
``STORE_UNAVAILABLE`` ``not ready: store unavailable``. What the service runs on (the store's
address, the active key id, how many tokens it holds, the global log position) and why it is not
ready (a store's error text names its host, user and tables) tell a scanner about the deployment,
and the log position moves with every tenant's writes; so they go to an ``admin`` token only.
Every check and every detail is in `readiness`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import PersistenceError
from fastapi import APIRouter

from domain.errors import IntegrityFailure
from domain.governance import Role
from infrastructure.api.context import Ctx, MaybeCaller, Service
from infrastructure.api.errors import refusal
from infrastructure.api.response_models.operations import Healthy, Ready
from infrastructure.api.responses import answers
from infrastructure.application.errors import Code

router = APIRouter(tags=["operations"])


@dataclass(frozen=True)
class Readiness:
    """Why the service cannot serve (empty: it can), and what it runs on, for admins; the code a
    not-ready answer carries, and the line it says without an admin token."""

    problems: list[str]
    details: dict[str, Any]
    code: Code = Code.NOT_READY
    public: str = "not ready"


def readiness(ctx: Service) -> Readiness:
    """Every readiness check and every detail an admin sees."""
    problems: list[str] = []
    status = ctx.ledger.status
    details: dict[str, Any] = {
        "store": status.where,
        "active_key_id": status.active_key_id,
        "tokens": len(ctx.tokens),
    }
    code, public = Code.NOT_READY, "not ready"
    try:
        details["log_position"] = status.head()
        keys = status.keys()
        refusal = status.write_refusal()
    except (PersistenceError, OSError) as exc:
        # As every store route answers then; the read store is not waited for as well.
        problems.append(f"store unreachable: {exc}")
        code, public = Code.STORE_UNAVAILABLE, "not ready: store unavailable"
    except IntegrityFailure as exc:
        problems.append(str(exc))
    else:
        details["keys"] = keys.statuses
        problems.extend(keys.mismatches)
        if refusal is not None:
            problems.append(refusal)
            public = "not ready: the store cannot take writes"
    if ctx.reader is not ctx.ledger and code is not Code.STORE_UNAVAILABLE:
        problems.extend(_read_store(ctx, details))
    if not status.key_ids:
        problems.append("no signing keys loaded")
    tokens = ctx.tokens.problem()
    if tokens is not None:
        problems.append(f"no token can be accepted: {tokens}")
    return Readiness(problems, details, code, public)


def _read_store(ctx: Service, details: dict[str, Any]) -> list[str]:
    """``MACE_READ_STORE``, where the reading routes read: it answers, and its head (how far it
    has caught up with ``log_position``) for admins."""
    status = ctx.reader.status
    try:
        head = status.head()
    except (PersistenceError, OSError) as exc:
        return [f"read store unreachable: {exc}"]
    details["read_store"] = {"store": status.where, "log_position": head}
    return []


@router.get(
    "/healthz", summary="the process is up", response_model=None, responses=answers(Healthy)
)
async def healthz() -> dict[str, Any]:
    # On the event loop, not in the worker threads: requests waiting for a store that is gone
    # may hold every one of those, and the process still answers that it is up.
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="ready or not; with an admin token also what the service runs on, or why not ready",
    description="No token needed. Without an admin token the answer is only "
    '`{"status": "ready"}` or 503 `NOT_READY` "not ready".',
    response_model=None,
    responses=answers(Ready, (503, "not ready (NOT_READY); the reason for an admin token only")),
)
def readyz(ctx: Ctx, who: MaybeCaller) -> dict[str, Any]:
    state = readiness(ctx)
    admin = who is not None and who.actor.holds(Role.ADMIN)
    if state.problems:
        reason = f"not ready: {'; '.join(state.problems)}" if admin else state.public
        raise refusal(state.code, reason)
    return {"status": "ready", **state.details} if admin else {"status": "ready"}
