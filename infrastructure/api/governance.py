"""Governance over HTTP: force-continue requests, council votes, halts, clears and the log.

The roles each action needs are the domain's rules (`domain.governance`); a refusal there is a
403 here. The acting identity is always the token's, never a field of the body.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from infrastructure.api.bodies import CouncilVote, ForceContinueAsk, HaltAsk, HaltClearAsk
from infrastructure.api.context import Caller, Ctx, OwnedJobId, ReadJobId, SnapshotIdPath
from infrastructure.api.response_models.governance import (
    ForceContinueAsked,
    GovernanceLog,
    HaltChanged,
    VoteCast,
)
from infrastructure.api.responses import answers
from infrastructure.application.tokens import Principal

router = APIRouter(tags=["governance"])


@router.get(
    "/v1/jobs/{job_id}/governance",
    summary="a job's governance log and its snapshots'",
    response_model=None,
    responses=answers(GovernanceLog),
)
def governance_log(job_id: ReadJobId, ctx: Ctx, who: Caller) -> dict[str, Any]:
    return {"job_id": job_id, "events": ctx.reader.governance.log(job_id, tenant=who.tenant)}


@router.post(
    "/v1/jobs/{job_id}/governance/force-continue",
    status_code=201,
    summary="admin: ask that replays of the job may continue past a divergence",
    response_model=None,
    responses=answers(ForceContinueAsked, status=201),
)
def request_force_continue(
    job_id: OwnedJobId, body: ForceContinueAsk, ctx: Ctx, who: Caller
) -> dict[str, Any]:
    # A rule the action breaks (GovernanceError) is bad input, answered 422 by the error table.
    return ctx.ledger.governance.request_force_continue(
        job_id, body.reason, who.actor, tenant=who.tenant
    )


@router.post(
    "/v1/jobs/{job_id}/governance/votes",
    status_code=201,
    summary="council: approve or reject a motion for the job (the latest vote counts)",
    response_model=None,
    responses=answers(VoteCast, status=201),
)
def vote(job_id: OwnedJobId, body: CouncilVote, ctx: Ctx, who: Caller) -> dict[str, Any]:
    return ctx.ledger.governance.vote(job_id, body.motion, body.vote, who.actor, tenant=who.tenant)


def _halt_tenant(who: Principal, store_wide: bool) -> str | None:
    """Whose halt: the caller's tenant's, or (``store_wide``) every tenant's."""
    return None if store_wide else who.tenant


@router.post(
    "/v1/snapshots/{snapshot_id}/halt",
    status_code=201,
    summary="record a security incident: the tenant's replays touching the snapshot halt",
    response_model=None,
    responses=answers(HaltChanged, status=201),
)
def halt(snapshot_id: SnapshotIdPath, body: HaltAsk, ctx: Ctx, who: Caller) -> dict[str, Any]:
    tenant = _halt_tenant(who, body.store_wide)
    return ctx.ledger.governance.halt_snapshot(snapshot_id, body.reason, who.actor, tenant)


@router.post(
    "/v1/snapshots/{snapshot_id}/clear",
    summary="council: lift the tenant's (or a store-wide) halt of a snapshot (FORCE_HALT_CLEAR)",
    response_model=None,
    responses=answers(HaltChanged),
)
def clear(
    snapshot_id: SnapshotIdPath, ctx: Ctx, who: Caller, body: HaltClearAsk | None = None
) -> dict[str, Any]:
    tenant = _halt_tenant(who, body is not None and body.store_wide)
    return ctx.ledger.governance.clear_halt(snapshot_id, who.actor, tenant)
