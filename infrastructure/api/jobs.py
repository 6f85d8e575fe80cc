"""Run Stage-0 jobs and read jobs back: the caller's tenant's jobs only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import NotFoundError
from domain.governance import Role
from infrastructure.api.bodies import Stage0Job
from infrastructure.api.context import (
    Caller,
    Ctx,
    OwnedJobId,
    ReadJobId,
    require,
)
from infrastructure.api.errors import invalid, not_found
from infrastructure.api.response_models.jobs import JobEvents, JobListing, JobLog, RunReport
from infrastructure.api.response_models.replays import ReplayAttempt
from infrastructure.api.responses import answers
from infrastructure.application.personal_data import HTTP_CHANNEL, JobRead
from projections.job_search import FILTERS, STATUSES, parse_job_query
from projections.job_summaries import (
    LISTING_LIMIT,
    LISTING_MAX_LIMIT,
    LISTING_MAX_OFFSET,
    run_report,
)

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post(
    "",
    status_code=201,
    summary="run one job through the Stage-0 runtime, recorded",
    response_model=None,
    responses=answers(RunReport, status=201),
)
def run_job(body: Stage0Job, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, Role.OPERATOR, Role.ADMIN)
    try:
        canonical_json([body.input, body.user])
        log = ctx.ledger.jobs.run(
            body.input,
            str(body.seed),
            job_id=body.job_id,
            user=body.user,
            capture_mode=body.capture_mode,
            snapshot_ids={kind.value: sid for kind, sid in body.snapshot_ids.items()},
            tenant=who.tenant,
        )
    except CanonicalJSONError as exc:
        raise invalid(f"input cannot be recorded: {exc}") from None
    return run_report(log)


@router.get(
    "",
    summary="the tenant's jobs, in the order they were recorded",
    response_model=None,
    responses=answers(JobListing),
)
def list_jobs(
    ctx: Ctx,
    who: Caller,
    non_replayable: Annotated[
        bool, Query(description="only jobs production cannot redo: replayable no or open")
    ] = False,
    limit: Annotated[int, Query(ge=1, le=LISTING_MAX_LIMIT)] = LISTING_LIMIT,
    offset: Annotated[int, Query(ge=0, le=LISTING_MAX_OFFSET)] = 0,
    job: Annotated[str | None, Query(description="job id prefix")] = None,
    status: Annotated[str | None, Query(description=", ".join(STATUSES))] = None,
    replayable: Annotated[str | None, Query(description="yes, no or open")] = None,
    error: Annotated[str | None, Query(description="the latest replay's error code")] = None,
    replayed_from: Annotated[
        str | None, Query(alias="from", description="latest replay at or after (UTC)")
    ] = None,
    replayed_to: Annotated[
        str | None, Query(alias="to", description="latest replay at or before (UTC)")
    ] = None,
) -> dict[str, Any]:
    # Checked by `parse_job_query`, as `mace jobs` and the dashboard check them: a bad one is 422.
    filters = (job, status, replayable, error, replayed_from, replayed_to)
    given = {name: value for name, value in zip(FILTERS, filters, strict=True) if value is not None}
    query = parse_job_query(who.tenant, given)
    return ctx.ledger.read_models.jobs(
        query, non_replayable=non_replayable, limit=limit, offset=offset
    )


def _personal_data(read: JobRead) -> dict[str, Any]:
    return {"versions": read.personal_versions, "redacted": not read.in_full}


@router.get(
    "/{job_id}",
    summary="a job's reflective log; personal data in full to admins only",
    response_model=None,
    responses=answers(JobLog),
)
def get_job(job_id: OwnedJobId, ctx: Ctx, who: Caller) -> dict[str, Any]:
    read = ctx.ledger.personal_data.read_job(job_id, who.tenant, who.actor, HTTP_CHANNEL)
    log = ctx.ledger.jobs.reflective_log(job_id, tenant=who.tenant)
    shown: dict[str, Any] = read.show(log.as_json())
    return {**shown, "status": log.status, "personal_data": _personal_data(read)}


@router.get(
    "/{job_id}/events",
    summary="a job's events; personal data in full to admins only",
    response_model=None,
    responses=answers(JobEvents),
)
def job_events(job_id: OwnedJobId, ctx: Ctx, who: Caller) -> dict[str, Any]:
    read = ctx.ledger.personal_data.read_job(job_id, who.tenant, who.actor, HTTP_CHANNEL)
    return {
        "job_id": job_id,
        "events": read.shown_events(),
        "personal_data": _personal_data(read),
    }


@router.get(
    "/{job_id}/replays/{attempt}",
    summary="one replay attempt's steps and report",
    response_model=None,
    responses=answers(ReplayAttempt),
)
def replay_attempt(
    job_id: ReadJobId, attempt: Annotated[int, Path(ge=1, le=2**31)], ctx: Ctx, who: Caller
) -> dict[str, Any]:
    try:
        record = ctx.reader.replays.record(job_id, attempt, tenant=who.tenant)
    except NotFoundError:
        raise not_found(f"replay {job_id}#{attempt}") from None
    return record.as_json()
