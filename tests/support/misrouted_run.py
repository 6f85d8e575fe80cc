"""An incident for replay tests: a recorded Stage-0 run whose router decision was changed.

The rule R4 decision below is one the declared router snapshot would never give for ``2 + 3``
(rule R1 sends it to the math agent), so replaying the run diverges on ``router_decision``.
"""

from __future__ import annotations

from typing import Any

WRONG_DECISION = {
    "agent": "generic_agent",
    "fallback": None,
    "rule_id": "R4",
    "why": "matched_R4_fallback",
}


def misrouted_run(entries: list[dict[str, Any]], job_id: str) -> list[dict[str, Any]]:
    """``mace events --json`` entries of a job as run-file lines, the router decision changed."""
    return run_lines(entries, job_id, WRONG_DECISION)


def run_lines(
    entries: list[dict[str, Any]],
    job_id: str,
    decision: dict[str, Any] | None = None,
    final_output: Any = None,
) -> list[dict[str, Any]]:
    """``mace events --json`` entries of a job as run-file lines: as the job ran, or with the
    router ``decision`` and the ``final_output`` (when given) put in their place."""
    started = entries[0]["payload"]
    lines: list[dict[str, Any]] = [
        {
            "type": "RunStarted",
            "job_id": job_id,
            "seed": started["job_seed"],
            "input": started["job_input"],
            "snapshot_ids": started["snapshot_ids"],
            "capture_mode": "full_io",
        }
    ]
    for entry in entries[1:]:
        if entry["event_type"] in {"JobCompleted", "JobSealed"}:
            continue
        line = {"type": entry["event_type"], **entry["payload"]}
        if decision is not None and entry["event_type"] == "RouterDecision":
            line.update(decision)
        if decision is not None and entry["event_type"] == "IterationTrace":
            line["router_decision"] = decision
        lines.append(line)
    if final_output is None:
        final_output = next(e for e in entries if e["event_type"] == "JobCompleted")["payload"][
            "final_output"
        ]
    lines.append({"type": "RunCompleted", "final_output": final_output})
    return lines
