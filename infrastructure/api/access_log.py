"""The tenant's record of who read personal data in full (seed 000 section 10)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from domain.governance import Role
from infrastructure.api.context import Caller, Ctx, require
from infrastructure.api.response_models.operations import PersonalDataReads
from infrastructure.api.responses import answers

router = APIRouter(prefix="/v1/personal-data", tags=["personal data"])


@router.get(
    "/reads",
    summary="every recorded read of personal data in full, oldest first",
    response_model=None,
    responses=answers(PersonalDataReads),
)
def personal_data_reads(ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, Role.ADMIN, Role.AUDITOR, Role.COUNCIL)
    return {"reads": ctx.ledger.personal_data.accesses(who.tenant)}
