"""What-if over the API (`WhatIfService`, `WhatIfBatchService`), recorded, never authoritative.

``POST /v1/whatif`` re-runs one of the caller's jobs under other snapshots or another policy
bundle; its answer is what ``mace replay JOB --with ... --json`` prints. ``POST /v1/whatif/batch``
re-runs a selection of the caller's jobs (a window of the log or a list of ids, never another
tenant's) as ``mace audit --with`` does, in the service's own process, one worker (forking a
process that runs threads is not safe), read where reading routes read; it is a route of its own
because its body selects jobs and its answer is totals and a row a job, not one job's diffs.
``GET /v1/whatif/{record_id}`` reads either kind of record back, verified.
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Path
from fastapi.responses import Response

from domain.whatif import changes_of
from domain.whatif_batch import ExpectedChange
from infrastructure.api.bodies import WhatIfAsk, WhatIfBatchAsk, WhatIfChangesAsk
from infrastructure.api.context import Caller, Ctx
from infrastructure.api.response_models.whatif import (
    WhatIfAnswer,
    WhatIfBatchAnswer,
    WhatIfRecordAnswer,
)
from infrastructure.api.responses import CanonicalJSONResponse, answers
from infrastructure.application.whatif_batch import BatchSelection

router = APIRouter(tags=["replay"])

RECORD_ID_PATTERN: Final = r"^[0-9a-f]{16}-[0-9]{1,9}$"
WhatIfRecordId = Annotated[str, Path(pattern=RECORD_ID_PATTERN)]
"""A what-if record's id: 16 hex digits of its content's digest, and the number free under it."""
REFUSED: Final = (403, "the caller may not replay in audit mode (ACCESS_DENIED); nothing recorded")


def _changes(asked: WhatIfChangesAsk) -> dict[str, str]:
    return asked.model_dump(exclude_none=True)


@router.post(
    "/v1/whatif",
    summary="re-run a recorded job under other snapshots or policy bundle: which decisions"
    " change, first and then the rest; recorded, never authoritative",
    responses=answers(
        WhatIfAnswer,
        REFUSED,
        (404, "the caller's tenant holds no such job (NOT_FOUND); nothing recorded"),
    ),
)
def run_whatif(body: WhatIfAsk, ctx: Ctx, who: Caller) -> Response:
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
