"""``POST /v1/audits``: `mace audit` for the caller's tenant, one signed audit record.

Every sealed job of the tenant is replayed in audit mode from one read of the log (where reading
routes read, ``MACE_READ_STORE`` when set); the record is written to ``MACE_STORE``. One worker,
in the service's own process: forking a process that runs threads is not safe.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from infrastructure.api.bodies import AuditAsk
from infrastructure.api.context import Caller, Ctx
from infrastructure.api.response_models.audits import AuditAnswer
from infrastructure.api.responses import CanonicalJSONResponse, answers
from infrastructure.application.audit import audit_answer, check_auditor
from infrastructure.application.audit_workers import AuditWorkers
from projections.audit import AuditScope

router = APIRouter(tags=["audit"])


@router.post(
    "/v1/audits",
    summary="replay every sealed job of the caller's tenant from one read of the log; one"
    " signed audit record",
    responses=answers(
        AuditAnswer,
        (403, "the caller may not replay in audit mode (ACCESS_DENIED); nothing recorded"),
    ),
)
def run_audit(body: AuditAsk, ctx: Ctx, who: Caller) -> Response:
    check_auditor(who.actor)
    with AuditWorkers(ctx.settings, 1) as workers:
        report = ctx.reader.audits.audit(AuditScope(who.tenant, body.since), workers, None)
    record = ctx.ledger.audits.record(report, who.actor)
    return CanonicalJSONResponse(audit_answer(report, record, 1))
