"""``POST /v1/jobs/{id}/fork``: fork one of the caller's jobs from an iteration (`ForkService`);
the answer is what ``mace fork JOB --at N --json`` prints."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from domain.whatif import changes_of
from infrastructure.api.bodies import ForkAsk
from infrastructure.api.context import Caller, Ctx, OwnedJobId
from infrastructure.api.response_models.fork import ForkAnswer
from infrastructure.api.responses import CanonicalJSONResponse, answers

router = APIRouter(tags=["replay"])


@router.post(
    "/v1/jobs/{job_id}/fork",
    summary="fork a recorded job from an iteration: the iterations before it kept as recorded,"
    " the rest re-run under other snapshots or input, recorded as a new job; never authoritative",
    responses=answers(
        ForkAnswer,
        (403, "the caller may not replay in audit mode (ACCESS_DENIED); nothing written"),
        (404, "the caller's tenant holds no such job (NOT_FOUND); nothing written"),
        (409, "this fork is recorded already (CONFLICT, naming it); nothing written"),
        (422, "bad input, or a job a fork cannot decide again (FORK_NOT_REDECIDABLE)"),
    ),
)
def fork_job(job_id: OwnedJobId, body: ForkAsk, ctx: Ctx, who: Caller) -> Response:
    named = None if body.changes is None else body.changes.model_dump(exclude_none=True)
    changes = None if not named else changes_of(named.items())
    result = ctx.ledger.forks.fork(
        job_id, body.at, who.actor, changes=changes, text=body.input, tenant=who.tenant
    )
    return CanonicalJSONResponse(result.answer())
