"""Recording OpenTelemetry traces as runs: each whole trace one job, through the once-only
import path (`RunImports.record_once`), so the same export sent again records nothing new.

A trace that is not whole (`domain.trace_spans.why_incomplete`: no root span, a parent missing,
a span not ended) is never recorded: a run built from part of a trace would be taken for the
whole run. Every trace of the export is mapped and checked against the limits before the first
is recorded, so a bad span or an oversized trace leaves the ledger untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from domain.job import DEFAULT_TENANT
from domain.run_file import ParsedRun
from domain.trace_run import run_of_trace
from domain.trace_spans import Span, traces_of, why_incomplete
from infrastructure.application.limits import InputLimits
from infrastructure.application.run_imports import RunImports
from projections.reflective_log import ReflectiveLog


@dataclass(frozen=True, slots=True)
class TraceOutcome:
    """What became of one trace: recorded (``log``; ``duplicate`` when it was recorded before),
    or not recorded, ``incomplete`` saying why."""

    trace_id: str
    log: ReflectiveLog | None = None
    events: int = 0
    duplicate: bool = False
    incomplete: str | None = None


class TraceImports:
    def __init__(self, run_imports: RunImports, limits: InputLimits) -> None:
        self.run_imports = run_imports
        self.limits = limits

    def record_whole_traces(
        self, spans: Iterable[Span], tenant: str = DEFAULT_TENANT
    ) -> list[TraceOutcome]:
        """Record each whole trace among ``spans`` once; the others are answered, not recorded.

        `SpanError` (nothing written) for a span that cannot be taken in; `RunTooLarge` for a
        trace past the run limits.
        """
        traces = traces_of(spans)
        runs = {
            trace_id: self.whole_run(trace_id, trace)
            for trace_id, trace in traces.items()
            if why_incomplete(trace) is None
        }
        outcomes: list[TraceOutcome] = []
        for trace_id, trace in traces.items():
            whole = runs.get(trace_id)
            if whole is None:
                outcomes.append(TraceOutcome(trace_id, incomplete=why_incomplete(trace)))
            else:
                outcomes.append(self.record(trace_id, whole, tenant))
        return outcomes

    def whole_run(self, trace_id: str, trace: list[Span]) -> ParsedRun:
        """The run a whole trace records, held to the run limits (`RunTooLarge`)."""
        run = run_of_trace(trace)
        name = f"trace {trace_id}"
        self.limits.check_events(name, [event.payload() for event in run.events])
        self.limits.check_final_output(name, run.completed.final_output)
        return run

    def record(self, trace_id: str, run: ParsedRun, tenant: str) -> TraceOutcome:
        log, duplicate = self.run_imports.record_once(run, tenant)
        return TraceOutcome(trace_id, log, len(run.events), duplicate)
