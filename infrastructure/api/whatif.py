"""``POST /v1/whatif``: re-run one of the caller's jobs under other snapshots or another policy
bundle (`WhatIfService`), or serve its memory reads as of a point of the log (``as_of``, and
``compare_to``: `AsOfService`); the answer is what ``mace replay JOB --with ... --json`` or
``mace replay JOB --as-of N [--compare-to M] --json`` prints."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from domain.as_of import parse_point
from domain.errors import InvalidInput
from domain.whatif import changes_of
from infrastructure.api.bodies import WhatIfAsk
from infrastructure.api.context import Caller, Ctx
from infrastructure.api.response_models.whatif_as_of import CounterfactualAnswer
from infrastructure.api.responses import CanonicalJSONResponse, answers

router = APIRouter(tags=["replay"])

_POINTS = ("as_of", "compare_to")
"""How the body names the two points, as bad input names them back."""


@router.post(
    "/v1/whatif",
    summary="re-run a recorded job under other snapshots or policy bundle (changes), or serve"
    " its memory reads as of a point of the log (as_of, compare_to): which decisions change,"
    " first and then the rest; recorded, never authoritative",
    responses=answers(
        CounterfactualAnswer,
        (403, "the caller may not replay in audit mode (ACCESS_DENIED); nothing recorded"),
        (404, "the caller's tenant holds no such job (NOT_FOUND); nothing recorded"),
    ),
)
def run_whatif(body: WhatIfAsk, ctx: Ctx, who: Caller) -> Response:
    if body.as_of is not None or body.compare_to is not None:
        if body.changes is not None:
            raise InvalidInput("as_of serves memory under the job's own snapshots: no changes")
        if body.as_of is None:
            raise InvalidInput("compare_to needs as_of: name the point it is compared with")
        as_of = parse_point(body.as_of, _POINTS[0])
        compare_to = None if body.compare_to is None else parse_point(body.compare_to, _POINTS[1])
        result = ctx.ledger.whatif_as_of.run(
            body.job_id, as_of, who.actor, tenant=who.tenant, compare_to=compare_to, names=_POINTS
        )
        return CanonicalJSONResponse(result.answer())
    if body.changes is None:
        raise InvalidInput("changes: name at least one change, or ask as_of a point of the log")
    named = body.changes.model_dump(exclude_none=True)
    changes = changes_of(named.items())
    result = ctx.ledger.whatif.run(body.job_id, changes, who.actor, tenant=who.tenant)
    # A what-if that ran is recorded whatever it found, and answered as a replay that ran is
    # (`POST /replay/request`): 200, its verdict and any error code in the body.
    return CanonicalJSONResponse(result.answer())
