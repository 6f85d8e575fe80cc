"""``POST /replay/request`` (seed 000 section 13): replay a job as the caller, recorded."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from domain.errors import ErrorCode
from domain.stage0.agents import AGENTS, AgentReply
from infrastructure.api.context import Caller, Ctx, OwnedReplayAsk
from infrastructure.api.errors import invalid
from infrastructure.api.response_models.replays import ReplayAnswer
from infrastructure.api.responses import CanonicalJSONResponse
from infrastructure.application.replays import ReplayResult

router = APIRouter(tags=["replay"])


@router.post(
    "/replay/request",
    summary="replay a job; every attempt, refused or not, is recorded",
    responses={
        200: {"model": ReplayAnswer},
        403: {
            "model": ReplayAnswer,
            "description": "the caller may not run this mode: the attempt is recorded, and its"
            " report says why (error.code ACCESS_DENIED)",
        },
    },
)
def request_replay(body: OwnedReplayAsk, ctx: Ctx, who: Caller) -> Response:
    unknown = sorted(set(body.mocks) - set(AGENTS))
    if unknown:
        raise invalid(f"mocks: unknown agent(s) {unknown}: expected some of {sorted(AGENTS)}")
    mocks = {
        name: AgentReply(text=m.text, claims=m.claims, evidence=m.evidence)
        for name, m in body.mocks.items()
    }
    result = ctx.ledger.replays.run(
        body.job_id,
        body.mode,
        who.actor,
        tenant=who.tenant,
        force_continue=body.force_continue,
        mocks=mocks,
    )
    refused = result.outcome.error_code is ErrorCode.ACCESS_DENIED
    content = replay_answer(body.job_id, result)
    return CanonicalJSONResponse(content, status_code=403 if refused else 200)


def replay_answer(job_id: str, result: ReplayResult) -> dict[str, Any]:
    """A recorded attempt as the service answers it (`ReplayAnswer`): a replay's, a
    re-execution's."""
    report = result.report
    error: dict[str, Any] | None = None
    if result.outcome.error_code is not None:
        error = {"code": report["error_code"], "message": report["error_message"]}
    return {
        "job_id": job_id,
        "attempt": result.attempt,
        "ok": result.outcome.ok,
        "authoritative": result.outcome.authoritative,
        "error": error,
        "report": report,
        "report_markdown": result.markdown,
    }
