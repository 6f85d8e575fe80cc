"""The input a Stage-0 job records: the caller's, with every value the privacy policy refused
replaced by its refusal mark (`domain.stage0.refusals`).

The live run calls this before it runs the job for the record. A first pass finds the refused
values; the job is then run over the masked input, which must decide exactly what the caller's
input decided (same route, agents, memory writes and answer) and refuse nothing but marks.
Otherwise the value cannot be kept out of the record faithfully, and the job is refused whole.
A replay never comes here: it re-runs over the recorded, already masked, input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.events import IterationTrace
from domain.job import CaptureMode
from domain.stage0.refusals import RefusedValue, is_mark, mask, still_holds
from projections.stage0_runtime import SemSource, Stage0Run, Stage0Snapshots, run_stage0


class UnmaskableInput(ValueError):
    """A refused value that could not be masked without changing what the job decides."""


def recorded_input(
    text: str,
    job_seed: str,
    user: str,
    snapshots: Stage0Snapshots,
    source: SemSource,
    capture_mode: CaptureMode,
    mark: Callable[[RefusedValue], str],
) -> str:
    """``text`` as the job records it; ``mark`` gives a refused value's refusal mark."""
    first = run_stage0("pending", job_seed, text, user, snapshots, source, capture_mode)
    if not first.refused:
        return text
    marks = {refused.text: mark(refused) for refused in first.refused}
    masked = mask(text, marks)
    again = run_stage0("pending", job_seed, masked, user, snapshots, source, capture_mode)
    if (
        any(still_holds(masked, raw) for raw in marks)
        or any(not is_mark(refused.text) for refused in again.refused)
        or _decisions(again) != _decisions(first)
    ):
        attributes = sorted({refused.attribute for refused in first.refused})
        msg = (
            f"the privacy policy refuses the value given for {attributes} and it cannot be kept"
            " out of the record without changing what the job decides; nothing was recorded"
        )
        raise UnmaskableInput(msg)
    return masked


def _decisions(run: Stage0Run) -> dict[str, Any]:
    """What a run decided, apart from the refused values themselves."""
    trace = run.events[-1]
    assert isinstance(trace, IterationTrace)
    return {
        "route": trace.router_decision,
        "agents": trace.selected_agents,
        "statuses": [output["status"] for output in trace.agent_outputs],
        "writes": [(write["key"], write["status"]) for write in trace.sem_writes],
        "answer": run.final_output,
    }
