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
from infrastructure.application.errors import ANSWERS

router = APIRouter(tags=["replay"])


@router.post(
    "/v1/whatif",
    summary="re-run a recorded job under other snapshots or policy bundle: which decisions"
    " change, first and then the rest; recorded, never authoritative",
    responses={
        **answers(
            WhatIfAnswer,
            (403, "the caller may not replay in audit mode (ACCESS_DENIED); nothing recorded"),
            (404, "the caller's tenant holds no such job (NOT_FOUND); nothing recorded"),
        ),
        409: {
            "model": WhatIfAnswer,
            "description": "the what-if ran and could say nothing (verdict failed): a named"
            " snapshot or bundle missing, unusable or halted (MISSING_SNAPSHOT,"
            " FORCE_HALT_REPLAY), or the job not reproducing itself; recorded",
        },
        500: {
            "model": WhatIfAnswer,
            "description": "the record is not intact (INTEGRITY_FAILURE): recorded, nothing"
            " said about the change",
        },
    },
)
def run_whatif(body: WhatIfAsk, ctx: Ctx, who: Caller) -> Response:
    named = body.changes.model_dump(exclude_none=True)
    changes = changes_of(named.items())
    result = ctx.ledger.whatif.run(body.job_id, changes, who.actor, tenant=who.tenant)
    error = result.report["error"]
    status = 200 if error is None else ANSWERS[error["code"]].status
    return CanonicalJSONResponse(result.answer(), status_code=status)
