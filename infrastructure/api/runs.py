"""Record runs from outside: open, send events in batches (idempotent by event id), complete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError

from domain.events import RunStarted
from domain.governance import Role
from domain.run_draft import RunDraft, RunDraftError, RunTooLarge
from domain.tool_boundary import ToolBoundaryError
from infrastructure.api.bodies import AbandonAsk, EventBatch, RunCompletion
from infrastructure.api.context import Caller, Ctx, RunIdPath, require
from infrastructure.api.errors import invalid, refusal, too_large
from infrastructure.api.response_models.runs import (
    BatchTaken,
    OpenRuns,
    RecordedRun,
    RunState,
)
from infrastructure.api.responses import answers
from infrastructure.application.errors import Code
from infrastructure.application.limits import InputLimits
from infrastructure.application.privacy_rules import ClearPrivateValue
from infrastructure.application.runs import RefusedSemClaim
from projections.job_summaries import recorded_run

router = APIRouter(prefix="/v1/runs", tags=["runs"])
RECORDERS = (Role.OPERATOR, Role.ADMIN)


def _run(draft: RunDraft) -> dict[str, Any]:
    return {"run_id": draft.run_id, "status": draft.status, "events": draft.count}


@router.get(
    "",
    summary="the runs still open (neither completed nor abandoned), oldest first",
    response_model=None,
    responses=answers(OpenRuns),
)
def open_runs(ctx: Ctx, who: Caller) -> dict[str, Any]:
    rows = ctx.ledger.read_models.open_runs(who.tenant)
    return {"runs": [{k: row[k] for k in ("run_id", "events", "position")} for row in rows]}


@router.post(
    "",
    status_code=201,
    summary="open a run (RunStarted); re-sending it is harmless",
    response_model=None,
    responses=answers(RunState, status=201),
)
def open_run(started: RunStarted, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *RECORDERS)
    try:
        draft, _ = ctx.ledger.run_uploads.open(started, who.tenant)
    except ClearPrivateValue as exc:
        raise invalid(str(exc), f"body.{exc.path}") from None
    return _run(draft)


@router.get(
    "/{run_id}",
    summary="a run's state: open or completed, and how many events",
    response_model=None,
    responses=answers(RunState),
)
def get_run(run_id: RunIdPath, ctx: Ctx, who: Caller) -> dict[str, Any]:
    return _run(ctx.ledger.run_uploads.get(run_id, who.tenant))


@router.post(
    "/{run_id}/events",
    summary="add a batch of events; events already held are skipped",
    response_model=None,
    responses=answers(BatchTaken),
)
def add_events(run_id: RunIdPath, batch: EventBatch, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *RECORDERS)
    pairs = [(item.event_id, item.event) for item in batch.events]
    try:
        # The service's own settings: the limits its body limit reads too.
        limits = InputLimits.of(ctx.settings)
        outcome = ctx.ledger.run_uploads.append(run_id, who.tenant, pairs, limits)
    except RunTooLarge as exc:
        raise too_large(str(exc)) from None
    except RunDraftError as exc:
        raise refusal(Code.CONFLICT, str(exc)) from None
    except (ClearPrivateValue, ToolBoundaryError, RefusedSemClaim) as exc:
        raise invalid(str(exc), f"body.events.{exc.position}.event") from None
    return {
        "run_id": run_id,
        "accepted": outcome.accepted,
        "duplicates": outcome.duplicates,
        "events": outcome.total,
    }


@router.post(
    "/{run_id}/abandon",
    summary="close an open run whose emitter is gone, as abandoned: it never becomes a job",
    response_model=None,
    responses=answers(RunState),
)
def abandon_run(run_id: RunIdPath, body: AbandonAsk, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *RECORDERS)
    try:
        draft = ctx.ledger.run_uploads.abandon(run_id, who.tenant, who.actor, body.reason)
    except RunDraftError as exc:
        raise refusal(Code.CONFLICT, str(exc)) from None
    return _run(draft)


@router.post(
    "/{run_id}/complete",
    summary="record the run as one sealed job",
    response_model=None,
    responses=answers(RecordedRun),
)
def complete_run(run_id: RunIdPath, body: RunCompletion, ctx: Ctx, who: Caller) -> dict[str, Any]:
    require(who, *RECORDERS)
    try:
        log, events = ctx.ledger.run_uploads.complete(run_id, who.tenant, body.final_output)
    except RunTooLarge as exc:
        raise too_large(str(exc)) from None
    except RunDraftError as exc:
        raise refusal(Code.CONFLICT, str(exc)) from None
    except ValidationError as exc:
        raise invalid(f"final_output cannot be recorded: {exc.errors()[0]['msg']}") from None
    except ClearPrivateValue as exc:
        raise invalid(str(exc), f"body.{exc.path}") from None
    except RefusedSemClaim as exc:
        raise invalid(f"run {run_id} event {exc.position}: {exc}") from None
    return recorded_run(log, events)
