"""What-if over the API (`WhatIfService`, `AsOfService`, `WhatIfBatchService`), recorded, never
authoritative.

``POST /v1/whatif`` re-runs one of the caller's jobs under other snapshots or another policy
bundle, or serves its memory reads as of a point of the log (``as_of``, and ``compare_to``); its
answer is what ``mace replay JOB --with ... --json`` or ``mace replay JOB --as-of N [--compare-to
M] --json`` prints. ``POST /v1/whatif/batch`` re-runs a selection of the caller's jobs (a window of
the log or a list of ids, never another tenant's) as ``mace audit --with`` does, in the service's
own process, one worker (forking a process that runs threads is not safe), read where reading
routes read; it is a route of its own because its body selects jobs and its answer is totals and
a row a job, not one job's diffs. ``GET /v1/whatif/{record_id}`` reads either kind of record back,
verified.
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Path
from fastapi.responses import Response

from domain.as_of import parse_point
from domain.errors import InvalidInput
from domain.whatif import changes_of
from domain.whatif_batch import ExpectedChange
from infrastructure.api.bodies import WhatIfAsk, WhatIfBatchAsk, WhatIfChangesAsk
from infrastructure.api.context import Caller, Ctx
from infrastructure.api.response_models.whatif import (
    WhatIfBatchAnswer,
    WhatIfRecordAnswer,
)
from infrastructure.api.response_models.whatif_as_of import CounterfactualAnswer
from infrastructure.api.responses import CanonicalJSONResponse, answers
from infrastructure.application.whatif_batch import BatchSelection

router = APIRouter(tags=["replay"])

RECORD_ID_PATTERN: Final = r"^[0-9a-f]{16}-[0-9]{1,9}$"
WhatIfRecordId = Annotated[str, Path(pattern=RECORD_ID_PATTERN)]
"""A what-if record's id: 16 hex digits of its content's digest, and the number free under it."""
REFUSED: Final = (403, "the caller may not replay in audit mode (ACCESS_DENIED); nothing recorded")


def _changes(asked: WhatIfChangesAsk) -> dict[str, str]:
    return asked.model_dump(exclude_none=True)


_POINTS = ("as_of", "compare_to")
"""How the body names the two points, as bad input names them back."""


@router.post(
    "/v1/whatif",
    summary="re-run a recorded job under other snapshots or policy bundle (changes), or serve"
    " its memory reads as of a point of the log (as_of, compare_to): which decisions change,"
    " first and then the rest; recorded, never authoritative",
    responses=answers(
        CounterfactualAnswer,
        REFUSED,
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
    changes = changes_of(_changes(body.changes).items())
    result = ctx.ledger.whatif.run(body.job_id, changes, who.actor, tenant=who.tenant)
    # A what-if that ran is recorded whatever it found, and answered as a replay that ran is
    # (`POST /replay/request`): 200, its verdict and any error code in the body.
    return CanonicalJSONResponse(result.answer())


@router.post(
    "/v1/whatif/batch",
    summary="re-run a selection of the caller's recorded jobs under other snapshots or policy"
    " bundle: totals and each job's first change; recorded once, never authoritative",
    responses=answers(WhatIfBatchAnswer, REFUSED),
)
def run_whatif_batch(body: WhatIfBatchAsk, ctx: Ctx, who: Caller) -> Response:
    changes = changes_of(_changes(body.changes).items())
    jobs = None if body.jobs is None else tuple(body.jobs)
    selection = BatchSelection(who.tenant, body.since, body.until, jobs)
    expected = frozenset(ExpectedChange(e.job_id, e.field) for e in body.expected)
    report = ctx.reader.whatif_batches.report(selection, changes, who.actor, expected)
    result = ctx.ledger.whatif_batches.record(report, who.actor)
    # Changed or failed jobs are the batch's findings, not the request's failure: 200.
    return CanonicalJSONResponse({"record_id": result.record_id, **report})


@router.get(
    "/v1/whatif/{record_id}",
    summary="a recorded what-if (one job or a batch) of the caller's tenant, verified",
    responses=answers(
        WhatIfRecordAnswer,
        (403, "the caller may not replay in audit mode (ACCESS_DENIED)"),
        (404, "the caller's tenant holds no such record (NOT_FOUND)"),
    ),
)
def read_whatif(record_id: WhatIfRecordId, ctx: Ctx, who: Caller) -> Response:
    return CanonicalJSONResponse(ctx.reader.whatif.shown(record_id, who.actor, tenant=who.tenant))
