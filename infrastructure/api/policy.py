"""The tenant's policy bundle over HTTP: set it, read the one in force, clear it.

Tokens are tenant-scoped, so only the tenant's own bundle is written here; the global fallback
is set from the command line. Reading answers whichever bundle applies (``scope`` says which).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from domain.governance import Role
from domain.policy import PolicyError
from domain.policy_book import scope_of
from infrastructure.api.bodies import PolicyPut
from infrastructure.api.context import Caller, Ctx, require
from infrastructure.api.errors import invalid
from infrastructure.api.response_models.policy import BundleCleared, BundleInForce, BundleSet
from infrastructure.api.responses import answers

router = APIRouter(prefix="/v1/policy", tags=["policy"])
ADMIN_ONLY = (403, "the caller is not an admin")


@router.put(
    "",
    summary="put a policy bundle in force for the tenant",
    response_model=None,
    responses=answers(
        BundleSet, ADMIN_ONLY, (422, "the bundle is refused: the rule and why; nothing is written")
    ),
)
def set_bundle(body: PolicyPut, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, Role.ADMIN)
    try:
        bundle = ctx.ledger.policy.set_bundle(who.tenant, body.bundle_yaml, who.actor)
    except PolicyError as exc:
        raise invalid(str(exc), "body.bundle_yaml") from None
    return {
        "scope": scope_of(who.tenant),
        "bundle_hash": bundle.bundle_hash,
        "rules": len(bundle.rules),
    }


@router.get(
    "",
    summary="the bundle in force: the tenant's own, else the global one, else null",
    response_model=None,
    responses=answers(BundleInForce),
)
def bundle_in_force(ctx: Ctx, who: Caller) -> dict[str, Any]:
    book = ctx.reader.policy.bundle_in_force(who.tenant)
    if book is None:
        return {"in_force": None}
    return {
        "in_force": {
            "scope": book.scope,
            "bundle_hash": book.bundle_hash,
            "bundle_yaml": book.bundle_yaml,
        }
    }


@router.delete(
    "",
    summary="clear the tenant's bundle: the global one (if any) applies again",
    response_model=None,
    responses=answers(BundleCleared, ADMIN_ONLY, (404, "the tenant has no bundle set (NOT_FOUND)")),
)
def clear_bundle(ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, Role.ADMIN)
    ctx.ledger.policy.clear_bundle(who.tenant, who.actor)  # NotFoundError: answered 404
    return {"scope": scope_of(who.tenant), "cleared": True}
