"""Re-execute an agent's code over HTTP: open the harness, send its calls, close it.

The agent's code runs in its own process (the ``mace-harness`` client); the harness, its matching
and its canonical JSON stay here (`application.open_reexecutions`): each call is answered by the
same `ReplayHarness` method the in-process API calls, and the attempt is recorded as in process.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi import APIRouter, Path

from domain.determinism import iso_text
from infrastructure.api.bodies import (
    ChoiceDraw,
    ClockAsk,
    HarnessCall,
    IdentityAsk,
    ModelCallAsk,
    PolicyAsk,
    RandbitsDraw,
    RandintDraw,
    RandomDraw,
    ReexecutionAsk,
    ReexecutionEnd,
    RetrieveAsk,
    ShuffleDraw,
    ToolCallAsk,
)
from infrastructure.api.context import Caller, Ctx
from infrastructure.api.replays import replay_answer
from infrastructure.api.response_models.reexecutions import HarnessAnswer, ReexecutionOpened
from infrastructure.api.response_models.replays import ReplayAnswer
from infrastructure.api.responses import answers
from infrastructure.application.replay_harness import ReplayHarness
from projections.reexecution import NO_ANSWER_KEPT

router = APIRouter(prefix="/v1/reexecutions", tags=["reexecution"])

ReexecutionId = Path(pattern=r"^[0-9a-f]{32}$", description="as the opening answered it")


@router.post(
    "",
    status_code=201,
    summary="open a re-execution of a job against its recording (its request is recorded)",
    response_model=None,
    responses=answers(ReexecutionOpened, status=201),
)
def open_reexecution(body: ReexecutionAsk, ctx: Ctx, who: Caller) -> dict[str, Any]:
    reexecution_id = ctx.reexecutions.open(body.job_id, body.mode, who.actor, who.tenant)
    return {
        "reexecution_id": reexecution_id,
        "job_id": body.job_id,
        "mode": body.mode.value,
        "idle_seconds": ctx.reexecutions.idle_seconds,
    }


@router.post(
    "/{reexecution_id}/calls",
    summary="the recorded answer to the code's next call; a call that left the recording is a"
    " divergence (409 REPLAY_DIVERGENCE with the canonical diff) and ends the matching",
    response_model=None,
    responses=answers(HarnessAnswer),
)
def call(
    body: HarnessCall, ctx: Ctx, who: Caller, reexecution_id: str = ReexecutionId
) -> dict[str, Any]:
    asked = partial(_ASKED[type(body)], body)
    answer = ctx.reexecutions.call(reexecution_id, who.actor, who.tenant, asked)
    return {"answer": answer}


@router.post(
    "/{reexecution_id}/close",
    summary="end the re-execution as the code ended, and record its result and report",
    response_model=None,
    responses=answers(ReplayAnswer),
)
def close(
    body: ReexecutionEnd, ctx: Ctx, who: Caller, reexecution_id: str = ReexecutionId
) -> dict[str, Any]:
    given = body.model_fields_set
    result = ctx.reexecutions.close(
        reexecution_id,
        who.actor,
        who.tenant,
        body.final_output if "final_output" in given else NO_ANSWER_KEPT,
        None if body.raised is None else f"raised {body.raised}",
    )
    return replay_answer(result.outcome.job_id, result)


def _mock(body: ModelCallAsk | ToolCallAsk | RetrieveAsk) -> Any:
    """The declared mock, or none when the body has no ``mock`` (null is a mock: JSON null)."""
    return body.mock if "mock" in body.model_fields_set else NO_ANSWER_KEPT


def _shuffled(body: ShuffleDraw, h: ReplayHarness) -> list[int]:
    order = list(range(body.length))
    h.rng().shuffle(order)
    return order


# Each call, answered by the in-process harness method of the same name.
_ASKED: dict[type[Any], Callable[[Any, ReplayHarness], Any]] = {
    ModelCallAsk: lambda b, h: h.model_call(b.model_id, b.prompt, mock=_mock(b)),
    ToolCallAsk: lambda b, h: h.tool_call(b.name, b.arguments, mock=_mock(b)),
    RetrieveAsk: lambda b, h: h.retrieve(b.query, mock=_mock(b)),
    PolicyAsk: lambda b, h: h.policy_text(b.bundle_hash),
    IdentityAsk: lambda _, h: h.identity().model_dump(mode="json"),
    ClockAsk: lambda _, h: iso_text(h.clock().now()),
    RandomDraw: lambda _, h: repr(h.rng().random()),
    RandintDraw: lambda b, h: h.rng().randint(b.a, b.b),
    RandbitsDraw: lambda b, h: h.rng().randbits(b.k),
    ChoiceDraw: lambda b, h: h.rng().choice(range(b.length)),
    ShuffleDraw: _shuffled,
}
