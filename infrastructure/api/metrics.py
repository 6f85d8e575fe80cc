"""``GET /metrics``: the replay evidence of the caller's tenant in Prometheus text format 0.0.4."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from infrastructure.api.context import Caller, Ctx, Service
from infrastructure.application.tokens import Principal
from projections.read_model_rows import JOB_INDEX, REPLAY_OUTCOMES, Row
from projections.replay_evidence import ReplayEvidence, replay_evidence

router = APIRouter(tags=["operations"])
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def tenant_replays(ctx: Service, who: Principal) -> list[Row]:
    """The tenant's replay attempts; one without a result is running or abandoned, not pending."""
    rows = ctx.ledger.read_models.rows(REPLAY_OUTCOMES)
    return ctx.ledger.governance.with_unanswered(r for r in rows if r.get("tenant") == who.tenant)


def tenant_evidence(ctx: Service, who: Principal) -> ReplayEvidence:
    jobs = [r for r in ctx.ledger.read_models.rows(JOB_INDEX) if r.get("tenant") == who.tenant]
    return replay_evidence(jobs, tenant_replays(ctx, who))


@router.get(
    "/metrics",
    # It answers its own PlainTextResponse. A response class with no media type of its own keeps
    # the document from listing a JSON body for 200, and leaves its errors documented as JSON.
    response_class=Response,
    response_model=None,
    summary="replay attempts, successes, success rate, mean time to reproduce, gaps",
    responses={
        200: {
            "description": "Prometheus text format 0.0.4",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def metrics(ctx: Ctx, who: Caller) -> PlainTextResponse:
    text = prometheus_text(tenant_evidence(ctx, who), who.tenant)
    return PlainTextResponse(text, media_type=CONTENT_TYPE)


def prometheus_text(evidence: ReplayEvidence, tenant: str) -> str:
    lines: list[str] = []
    tenant_label = f'tenant="{_escape(tenant)}"'

    def family(name: str, kind: str, help_text: str) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")

    family("mace_replay_attempts_total", "counter", "Replay attempts by mode and outcome.")
    for (mode, outcome), count in sorted(evidence.attempts.items()):
        labels = f'{tenant_label},mode="{_escape(mode)}",outcome="{_escape(outcome)}"'
        lines.append(f"mace_replay_attempts_total{{{labels}}} {count}")
    family("mace_replay_successes_total", "counter", "Replays that reproduced their job.")
    modes = sorted({mode for mode, _ in evidence.attempts})
    for mode in modes:
        ok = evidence.attempts.get((mode, "ok"), 0)
        lines.append(f'mace_replay_successes_total{{{tenant_label},mode="{_escape(mode)}"}} {ok}')
    family(
        "mace_replay_success_rate",
        "gauge",
        "Successes over replays that ran (not refused; NaN: none).",
    )
    lines.append(f"mace_replay_success_rate{{{tenant_label}}} {_number(evidence.success_rate)}")
    family(
        "mace_replay_mean_time_to_reproduce_seconds",
        "gauge",
        "Mean seconds from replay request to result, over successful replays (NaN: none).",
    )
    mean = _number(evidence.mean_seconds_to_reproduce)
    lines.append(f"mace_replay_mean_time_to_reproduce_seconds{{{tenant_label}}} {mean}")
    family("mace_jobs", "gauge", "Jobs recorded.")
    lines.append(f"mace_jobs{{{tenant_label}}} {evidence.jobs}")
    family("mace_jobs_not_replayable", "gauge", "Jobs production replay cannot redo.")
    lines.append(f"mace_jobs_not_replayable{{{tenant_label}}} {evidence.jobs_not_replayable}")
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float | None) -> str:
    return "NaN" if value is None else repr(round(value, 6))
