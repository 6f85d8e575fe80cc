"""How a job is shown: one shape for the CLI, the HTTP API and the dashboard."""

from __future__ import annotations

from typing import Any, Final

from domain.errors import InvalidInput
from projections.read_model_rows import Row
from projections.reflective_log import ReflectiveLog


def run_report(log: ReflectiveLog) -> dict[str, Any]:
    """A Stage-0 job just run: its answer, its one iteration's decisions, and why it kept what
    it kept (``capture_why``: `domain.capture.CaptureWhy`)."""
    assert log.completion is not None and log.capture_why is not None
    trace = log.iteration_trace[0]
    return {
        "job_id": log.job_id,
        "job_seed": log.job_seed,
        "input": log.job_input,
        "capture_mode": log.capture_mode,
        "capture_why": log.capture_why.value,
        "final_output": log.completion.final_output,
        "replayable": log.completion.replayable,
        "missing_artifacts": [m.model_dump() for m in log.completion.missing_artifacts],
        "router_decision": trace["router_decision"],
        "selected_agents": trace["selected_agents"],
        "sem_reads": trace["sem_reads"],
        "sem_writes": trace["sem_writes"],
        "snapshot_ids": log.snapshot_ids,
    }


def recorded_run(log: ReflectiveLog, events: int) -> dict[str, Any]:
    """A run recorded from outside: its id, how many events, and whether it can be replayed."""
    assert log.completion is not None
    return {
        "job_id": log.job_id,
        "events": events,
        "replayable": log.completion.replayable,
        "missing_artifacts": [m.model_dump() for m in log.completion.missing_artifacts],
    }


def job_summary(row: Row) -> dict[str, Any]:
    """One line of the job listing, from the job index."""
    return {
        "job_id": row["job_id"],
        "tenant": row["tenant"],
        "status": row["status"],
        "capture_mode": row["capture_mode"],
        "replayable": row["replayable"],
        "missing_artifacts": row["missing_artifacts"],
    }


def job_listing(rows: list[Row]) -> list[dict[str, Any]]:
    """The jobs in the order the store recorded them."""
    # Rows projected before jobs had positions have only their registry number; they came first.
    chosen = sorted(rows, key=lambda row: (row.get("position", 0), row.get("job_number", 0)))
    return [job_summary(row) for row in chosen]


LISTING_LIMIT: Final = 100
"""Jobs a page of the listing holds unless asked for another number."""
LISTING_MAX_LIMIT: Final = 1000
LISTING_MAX_OFFSET: Final = 10_000_000


def listing_page(summaries: list[dict[str, Any]], limit: int, offset: int) -> dict[str, Any]:
    """The page of a job listing that ``mace jobs`` and ``GET /v1/jobs`` both answer: the
    ``limit`` jobs after the first ``offset``, and ``total``, how many the filter kept."""
    for name, value, low, high in (
        ("limit", limit, 1, LISTING_MAX_LIMIT),
        ("offset", offset, 0, LISTING_MAX_OFFSET),
    ):
        if not low <= value <= high:
            raise InvalidInput(f"{name} must be from {low} to {high}, got {value}")
    return {"jobs": summaries[offset : offset + limit], "total": len(summaries)}
