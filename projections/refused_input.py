"""The input a Stage-0 job records: the caller's, with every value the privacy policy refused
replaced by its refusal mark (`domain.stage0.refusals`).

The live run runs the job over the caller's input through this. When the privacy policy refuses
nothing (nearly every job), that run is the one recorded: the job runs once. Otherwise the job
is run again over the masked input, which must decide exactly what the caller's input decided
(same route, agents, memory writes and answer) and refuse nothing but marks; if it does not,
the value cannot be kept out of the record faithfully, and the job is refused whole. A replay
never comes here: it re-runs over the recorded, already masked, input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.events import IterationTrace
from domain.stage0.refusals import RefusedValue, is_mark, mask, still_holds
from projections.stage0_runtime import Stage0Run


class UnmaskableInput(ValueError):
    """A refused value that could not be masked without changing what the job decides."""


def recorded_input(
    text: str,
    run_over: Callable[[str], Stage0Run],
    mark: Callable[[RefusedValue], str],
) -> tuple[str, Stage0Run]:
    """``text`` as the job records it, and the run to record: ``run_over`` runs the job over an
    input; ``mark`` gives a refused value's refusal mark."""
    first = run_over(text)
    if not first.refused:
        return text, first
    marks = {refused.text: mark(refused) for refused in first.refused}
    masked = mask(text, marks)
    again = run_over(masked)
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
    return masked, again


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
