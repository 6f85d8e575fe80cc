"""``POST /v1/whatif``: re-run one of the caller's jobs under other snapshots or another policy
bundle (`WhatIfService`); the answer is what ``mace replay JOB --with ... --json`` prints."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from domain.whatif import changes_of
from infrastructure.api.bodies import WhatIfAsk
from infrastructure.api.context import Caller, Ctx
from infrastructure.api.response_models.whatif import WhatIfAnswer
from infrastructure.api.responses import CanonicalJSONResponse, answers

router = APIRouter(tags=["replay"])


@router.post(
    "/v1/whatif",
    summary="re-run a recorded job under other snapshots or policy bundle: which decisions"
    " change, first and then the rest; recorded, never authoritative",
    responses=answers(
        WhatIfAnswer,
        (403, "the caller may not replay in audit mode (ACCESS_DENIED); nothing recorded"),
        (404, "the caller's tenant holds no such job (NOT_FOUND); nothing recorded"),
    ),
)
def run_whatif(body: WhatIfAsk, ctx: Ctx, who: Caller) -> Response:
    named = body.changes.model_dump(exclude_none=True)
    changes = changes_of(named.items())
    result = ctx.ledger.whatif.run(body.job_id, changes, who.actor, tenant=who.tenant)
    # A what-if that ran is recorded whatever it found, and answered as a replay that ran is
    # (`POST /replay/request`): 200, its verdict and any error code in the body.
    return CanonicalJSONResponse(result.answer())
