"""A job's ReflectiveLog (seed 000 sections 3, 5 and 9), read from its ordered, verified events.

`complete_job` is the enforcement check at job end: it folds the reducers over everything the
job recorded, lists what production replay would lack and sets ``replayable`` from that list,
whether the job ran here or was recorded by an outside emitter. `ReflectiveLog.of` reads the
whole log back from a job.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

from domain.capture import CaptureWhy, missing_artifacts
from domain.events import (
    IterationTrace,
    JobCompleted,
    MaterialisedState,
    RunEvent,
    decode_recorded,
)
from domain.job import CaptureMode, Job
from domain.snapshot import SnapshotKind
from domain.stage0.config import BrainStateConfig, GovernanceConfig, SelfRepConfig
from projections.brainstate import fold_brainstate
from projections.selfrep import fold_selfrep


def recorded_events(job: Job) -> list[tuple[int, RunEvent]]:
    """The job's recorded facts as Run Events, with their sequence indexes."""
    return [(f.sequence_index, decode_recorded(f.event_type, f.payload)) for f in job.facts]


@dataclass(frozen=True, slots=True)
class RanAsRecorded:
    """The facts of a job as its records decode (in order, from sequence index 0), held by the
    caller that recorded or read them: its completion takes these instead of decoding the job's
    facts again. A run recorded from outside holds them as `RunEvent.as_read_back` gives them
    (the event parsed where its record decodes to it, else that decode); a run sent in batches
    decodes its job's facts once (`RunService.close`).

    ``brainstate``: the BrainState a job just run here folded, taken instead of folding it
    again (None: folded over ``events``). The run folded its facts before the capture mode
    dropped model I/O from them, which BrainState never reads (`brainstate._brought_to_mind`),
    so its state is theirs."""

    events: Sequence[RunEvent]
    brainstate: MaterialisedState | None = None


def complete_job(
    job: Job,
    final_output: Any,
    stored_snapshots: Set[str],
    selfrep: SelfRepConfig | None,
    brainstate: BrainStateConfig | None,
    governance: GovernanceConfig | None = None,
    held_bundles: Set[str] = frozenset(),
    ran: RanAsRecorded | None = None,
) -> JobCompleted:
    """The job's closing verdict over everything it recorded: answer, states, replayability
    (``governance``: the job's governance snapshot, when usable, whose iteration cap its
    replays obey)."""
    if ran is None:
        indexed = recorded_events(job)
        events = [event for _, event in indexed]
    else:
        events = list(ran.events)
        indexed = list(enumerate(events))
    missing = missing_artifacts(
        job.snapshot_ids,
        stored_snapshots,
        indexed,
        CaptureMode(job.capture_mode),
        held_bundles,
        governance,
    )
    folded = None if ran is None else ran.brainstate
    if brainstate is not None and folded is None:
        folded = MaterialisedState.of(fold_brainstate(brainstate, events, job.job_seed))
    return JobCompleted(
        final_output=final_output,
        replayable=not missing,
        missing_artifacts=missing,
        selfrep=None if selfrep is None else MaterialisedState.of(fold_selfrep(selfrep, events)),
        brainstate=None if brainstate is None else folded,
    )


def _traces_and_completion(job: Job) -> list[RunEvent]:
    """The job's iteration traces and completion, decoded: its other facts are not."""
    wanted = {IterationTrace.EVENT_TYPE, JobCompleted.EVENT_TYPE}
    return [decode_recorded(f.event_type, f.payload) for f in job.facts if f.event_type in wanted]


@dataclass(frozen=True, slots=True)
class ReflectiveLog:
    job_id: str
    job_seed: str
    job_input: str
    capture_mode: str
    snapshot_ids: dict[str, str | None]
    iteration_trace: list[dict[str, Any]]
    completion: JobCompleted | None
    sealed: bool
    capture_why: CaptureWhy | None = None
    """Why the job kept what it kept, for the job just run (`JobService.run`); None when read
    back: the job records its mode, not who chose it."""

    @classmethod
    def of(cls, job: Job, built: Sequence[RunEvent] | None = None) -> ReflectiveLog:
        """``built``: the job's facts as the caller built them to record (`RanAsRecorded` and
        its completion), in order, read instead of decoding the job's facts again."""
        facts = built if built is not None else _traces_and_completion(job)
        traces: list[dict[str, Any]] = []
        completion: JobCompleted | None = None
        for fact in facts:
            if isinstance(fact, IterationTrace):
                traces.append(fact.trace_entry())
            elif isinstance(fact, JobCompleted):
                completion = fact
        return cls(
            job_id=job.job_id,
            job_seed=job.job_seed,
            job_input=job.job_input,
            capture_mode=job.capture_mode,
            snapshot_ids={
                f"{k.value}_snapshot_id": job.snapshot_ids.get(k.value) for k in SnapshotKind
            },
            iteration_trace=traces,
            completion=completion,
            sealed=job.sealed,
        )

    @property
    def status(self) -> str:
        if self.sealed:
            return "sealed"
        return "completed" if self.completion is not None else "open"

    def as_json(self) -> dict[str, Any]:
        completion = self.completion
        return {
            "job_id": self.job_id,
            "job_seed": self.job_seed,
            "input": self.job_input,
            "capture_mode": self.capture_mode,
            **self.snapshot_ids,
            "iteration_trace": self.iteration_trace,
            "final_answer": None if completion is None else completion.final_output,
            "replayable": None if completion is None else completion.replayable,
            "missing_artifacts": (
                [] if completion is None else [m.model_dump() for m in completion.missing_artifacts]
            ),
            "sealed": self.sealed,
        }
