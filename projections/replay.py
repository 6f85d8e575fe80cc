"""Replay: seed 000 section 6, step by step, as a rebuild of a job's projections.

`replay_job` loads the job's ReflectiveLog, checks that every declared snapshot is present, not
halted and signed, re-folds SelfRepresentation and BrainState through the reducers the live run
used, re-runs each recorded iteration through the very `run_stage0` the live run called (routing
re-decided from the recorded RouterConfig snapshot, memory as the tenant's SEM log held it where
the ledger recorded the job: `replay_sem`) and compares its SEM facts, then every seed 004
section 5 field, then the final answer. Each verification step is logged, in order, for
the append-only replay record. The first difference stops the replay (``REPLAY_DIVERGENCE``, or
``RESULT_MISMATCH`` for the final answer) unless a force-continue was asked for *and* governance
allows it; a forced replay runs to the end, lists every divergence and is not authoritative.

The store, the signatures and the ops clock are reached through `ReplaySource` and
`ReplayRequest.elapsed`; nothing here reads the wall clock or writes anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, NoReturn, Protocol

import orjson

from domain.as_of import MemoryAsOf
from domain.canonical import canonical_json, digest
from domain.capture import (
    missing_artifacts,
    policy_bundles_named,
    snapshots_found_at_completion,
)
from domain.errors import ErrorCode, InvalidInput, MaceError
from domain.events import (
    EQUALITY_FIELDS,
    ITERATION_EVENTS,
    AgentOutput,
    GateDecision,
    InputReceived,
    IterationTrace,
    JobCompleted,
    MaterialisedState,
    MissingArtifact,
    ModelCallEnvelope,
    PolicySnapshotRef,
    RetrievalRequest,
    RetrievalResponse,
    RouterDecision,
    RunEvent,
    SemRead,
    SemWrite,
    ToolCall,
    ToolResult,
    decode_recorded,
)
from domain.fork import lineage_of
from domain.job import CaptureMode, Job, RecordedFact
from domain.memories import Memory as StoredMemory
from domain.provenance import SERIALIZER, unimplemented
from domain.replay_access import ReplayMode
from domain.retrieval import SCORE_EPSILON, ledger_hits, same_hits
from domain.sem import SemEntry
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.agents import AGENTS, Agent, AgentReply, AgentRequest, Memory
from domain.stage0.config import parse_config
from domain.stage0.router import UnroutableText
from domain.tool_boundary import ToolBoundaryError, check_tool_boundary, tool_steps
from domain.whatif import WhatIfChanges
from projections.brainstate import fold_brainstate
from projections.replay_checks import (
    Check,
    FactCheck,
    HashMismatch,
    RecordMismatch,
    diverged_iteration_facts,
    iteration_fact,
    outside_fact,
    request_checked,
    response_checked,
    unpersisted,
    unreached,
)
from projections.replay_sem import (
    MemoryAsRecorded,
    MemoryAtPosition,
    SemHistory,
    sem_differences,
)
from projections.selfrep import fold_selfrep
from projections.stage0_runtime import SemSource, Stage0Run, Stage0Snapshots, run_iteration

_ANSWERED_EVENTS = frozenset(
    {ToolCall.EVENT_TYPE, ToolResult.EVENT_TYPE, RetrievalRequest.EVENT_TYPE}
)
"""The events whose answer production re-applies from the record: a tool's result, a retrieval's
response. One that is missing is refused as an output that was not persisted."""
NOT_REPRODUCED = "NOT REPRODUCED"
NOT_REPRODUCED_WHY = "none of the run's events could be re-executed"
_RETRIEVALS = (RetrievalRequest, RetrievalResponse)
_COMPARED_EVENTS = (InputReceived, RouterDecision, AgentOutput, SemRead, SemWrite)
"""The iteration's events compared with the re-run besides its trace (compared field by field)."""
_RE_EXECUTED = frozenset({Check.REEXECUTED, Check.DIVERGED})
WHATIF_REASON = (
    "a what-if: the job re-run under snapshots or a policy bundle it was not recorded under;"
    " never authoritative"
)
AS_OF_REASON = (
    "as of a point in the log: the job's retrievals and SEM reads served from the tenant's memory"
    " as it stood there, not where the job met it; never authoritative"
)
_SEM_AS_HELD = (
    ": the re-run met the key as the tenant's SEM log held it where the ledger recorded the job"
    " (a version deleted below the newest checkpoint fails its stream's head check as"
    " INTEGRITY_FAILURE; one deleted after it, or never stored, differs here)"
)


class ReplaySource(SemHistory, Protocol):
    """What a replay reads from the ledger; every read is verified before it is returned."""

    carries_tenant_state: bool
    """Whether the tenant's memory log, SEM log and policy books are here to read (a run bundle
    holds a job's own records only): without them, what they decide is taken as recorded."""

    def load_job(self, job_id: str) -> Job:
        """The job, its MACs, versions, seal and witness verified (MaceError otherwise)."""

    def job_position(self, job: Job) -> int:
        """The log position of the job's first stored record: where the ledger recorded it
        (`replay_sem`); asked only where the tenant's state is carried."""

    def snapshot_absent(self, snapshot_id: str) -> Absent | None:
        """None when the ledger holds a snapshot with this id (not yet verified); else what the
        ledger itself says of its absence."""

    def load_snapshot(self, snapshot_id: str) -> Snapshot:
        """The snapshot, signature and content address verified (MaceError otherwise)."""

    def halt_reason(self, tenant: str, snapshot_id: str) -> str | None:
        """Why the tenant's replays touching the snapshot are halted, or None when they are not."""

    def memories_at(self, tenant: str, position: int) -> Sequence[StoredMemory] | None:
        """The tenant's live memories as its memory log stood at ``position``, verified; None
        when the log never reached that position."""

    def policy_bundles(self, tenant: str) -> Mapping[str, str]:
        """The policy bundles the ledger holds for the tenant (its own and store-wide ones, every
        one ever put in force): YAML by bundle hash, verified."""


@dataclass(frozen=True, slots=True)
class Absent:
    """A snapshot the ledger does not hold."""

    deleted: str | None = None
    """What proves the ledger held it (the newest checkpoint's head of its stream); None when
    the ledger has no such proof."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first (or, forced, each) place where the replay differs from the record."""

    code: ErrorCode
    iteration: int | None
    field: str
    recorded: Any
    replayed: Any

    def as_json(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "iteration": self.iteration,
            "field": self.field,
            "recorded": self.recorded,
            "replayed": self.replayed,
        }


@dataclass(frozen=True, slots=True)
class StepLog:
    step: str
    outcome: str  # "ok", "failed", "skipped" or, in a what-if, "changed"
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"step": self.step, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True)
class ReplayRequest:
    job_id: str
    mode: ReplayMode
    force_continue: bool = False
    force_approved: bool = False
    mocks: Mapping[str, AgentReply] = field(default_factory=dict)
    elapsed: Callable[[], float] = lambda: 0.0
    """Seconds since the replay began, by the ops clock: checked against the time cap only."""
    changes: WhatIfChanges | None = None
    """A what-if: re-run the job under these snapshots and policy bundle instead of the ones it
    declared. Every difference is then a change the what-if lists (none stops it), and the
    outcome is never authoritative."""
    as_of: MemoryAsOf | None = None
    """An as-of replay: retrievals and SEM reads served from the tenant's memory as it stood at
    this point of the log instead of where the job met it; a counterfactual as a what-if is."""

    @property
    def counterfactual(self) -> bool:
        """A what-if or an as-of: its differences are listed, never a divergence of the record."""
        return self.changes is not None or self.as_of is not None


@dataclass
class ReplayOutcome:
    job_id: str
    mode: ReplayMode
    steps: list[StepLog] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    error_code: ErrorCode | None = None
    error_message: str | None = None
    non_authoritative: list[str] = field(default_factory=list)
    unreconstructable: list[MissingArtifact] = field(default_factory=list)
    capture_mode: str | None = None
    snapshot_ids: dict[str, str | None] = field(default_factory=dict)
    halt_snapshots: list[str] = field(default_factory=list)
    """Snapshots that failed verification or were deleted: the caller sets FORCE_HALT_REPLAY on
    them."""
    checks: list[FactCheck] = field(default_factory=list)
    """How each recorded fact was checked, in stream order, then the facts derived from them."""

    @property
    def ok(self) -> bool:
        """The replay reproduced the job: no error, and at least one recorded fact re-executed
        and matched. One that ran to its end re-executing nothing is NOT REPRODUCED: not ok,
        though no error stopped it."""
        return self.error_code is None and any(
            row.check is Check.REEXECUTED and row.sequence_index is not None for row in self.checks
        )

    @property
    def authoritative(self) -> bool:
        return not self.non_authoritative

    @classmethod
    def stopped(
        cls, job_id: str, mode: ReplayMode, step: str, code: ErrorCode, message: str
    ) -> ReplayOutcome:
        """An attempt stopped outside the algorithm's own steps (access control, a bad read)."""
        outcome = cls(job_id, mode, error_code=code, error_message=message)
        outcome.steps.append(StepLog(step, "failed", f"{code.value}: {message}"))
        return outcome


class _Stopped(Exception):
    pass


def replay_job(source: ReplaySource, request: ReplayRequest) -> ReplayOutcome:
    replay = _Replay(source, request)
    with contextlib.suppress(_Stopped):  # a stop is recorded in the outcome it returns
        replay.run()
    replay.close_checks()
    return replay.outcome


class _Replay:
    def __init__(self, source: ReplaySource, request: ReplayRequest) -> None:
        self.source = source
        self.request = request
        self.outcome = ReplayOutcome(request.job_id, request.mode)
        self.facts: list[RecordedFact] = []
        """The job's recorded facts but its completion, as stored (step 1)."""
        self.indexed: list[tuple[int, RunEvent]] = []
        """The same facts decoded, each once, when the replay first reads them (step 4)."""
        self.rows: dict[int, FactCheck] = {}
        self.derived: list[FactCheck] = []
        self.bundles: Mapping[str, str] = {}
        self.tenant = ""
        """The job's tenant, once it is loaded: whose memories and bundles the replay reads."""
        self.seconds: float | None = None
        """The replay time cap, once the job's governance snapshot is verified (step 3)."""
        self.job_position: int | None = None
        """Where the ledger recorded the job in its log (`recorded_at`)."""
        self.reruns: dict[int, list[RunEvent] | None] = {}
        """Each iteration's re-run events, as it was re-run (None: it could not be)."""
        self.sem_written: dict[str, SemEntry] = {}
        """The SEM entries the re-run iterations wrote so far, by key: a later iteration's
        memory holds them over the tenant's SEM."""
        self.fork_prefix: tuple[int, Stage0Snapshots] | None = None
        """A fork's: the iteration it re-ran from, and the snapshots the iterations before it
        were decided under (`fork_prefix_snapshots`)."""

    def run(self) -> None:
        job, completion = self.load_reflective_log()
        ids = self.required_snapshots(job, completion)
        self.no_force_halt(job, ids)
        snapshots = self.verified_snapshots(ids)
        self.fork_prefix_snapshots(job)
        events = self.ordered_events()
        self.seed_rng(job)
        missing = self.persisted_outputs(job, events)
        self.outside_facts(events, missing)
        body = [event for _, event in events]
        if not self.request.counterfactual:
            self.reducers(job, snapshots, body, completion)
            computed = self.iterations(job, snapshots, body, missing)
        else:
            # A what-if's states are folded over what it re-ran, once it re-ran it; and its first
            # change is a decision, not the state the decisions sum up to.
            computed = self.iterations(job, snapshots, body, missing)
            self.reducers(job, snapshots, self.as_rerun(body), completion)
        self.final_answer(computed, completion)
        self.finish()

    # Logging and stopping

    def step(self, name: str, outcome: str, detail: str) -> None:
        """Log a step; one that did not fail is logged only inside the time cap."""
        if outcome != "failed":
            self.within_time(name)
        self.outcome.steps.append(StepLog(name, outcome, detail))

    def within_time(self, where: str) -> None:
        """Stop with REPLAY_TIMEOUT once the replay has run longer than its governance snapshot
        allows: checked as each step ends and before each re-run (iteration or retrieval)."""
        if self.seconds is not None and self.request.elapsed() > self.seconds:
            message = f"replay time cap {self.seconds:g} s (governance snapshot) exceeded"
            self.stop(ErrorCode.REPLAY_TIMEOUT, f"{where}: limits", message)

    def stop(self, code: ErrorCode, step: str, message: str) -> NoReturn:
        self.step(step, "failed", f"{code.value}: {message}")
        self.outcome.error_code = code
        self.outcome.error_message = message
        raise _Stopped

    def diverge(self, divergence: Divergence, why: str = "") -> None:
        """Record a divergence; stop unless a force-continue was asked for and is allowed.
        ``why``: what the message adds to "differs from the record"."""
        self.outcome.divergences.append(divergence)
        where = "job" if divergence.iteration is None else f"iteration {divergence.iteration}"
        step = f"compare {divergence.field} ({where})"
        if self.request.counterfactual:
            # Not a divergence of the record (it reproduced before the what-if ran) but a
            # consequence of the change: listed, and the what-if goes on to the rest.
            self.step(step, "changed", f"{where}: {divergence.field} changes {self.under()}")
            return
        message = f"{where}: {divergence.field} differs from the record{why}"
        if not self.request.force_continue:
            self.stop(divergence.code, step, message)
        if not self.request.force_approved:
            self.stop(
                ErrorCode.FORCE_CONTINUE_REQUIRED,
                step,
                f"{message}; continuing needs an admin's force-continue request and a council"
                " approval for this job in its governance record",
            )
        self.step(step, "failed", f"{divergence.code.value}: {message} (forced: continuing)")

    def under(self) -> str:
        """What a counterfactual's differences are under: the what-if's changes, or the point."""
        as_of = self.request.as_of
        if as_of is None:
            return "under the what-if's changes"
        return f"with memory as of {as_of.point.label()}"

    # Seed 000 section 6, steps 1 to 9

    def load_reflective_log(self) -> tuple[Job, JobCompleted]:
        """The job and its completion, decoded; its other facts are decoded at step 4, which a
        replay stopped before never reaches (each is then reported unchecked by its type)."""
        step = "1 load reflective log"
        try:
            job = self.source.load_job(self.request.job_id)
        except MaceError as exc:
            if exc.code is not ErrorCode.INTEGRITY_FAILURE:
                raise
            self.stop(ErrorCode.INTEGRITY_FAILURE, step, f"job stream: {exc.message}")
        self.tenant = job.tenant
        completions = [f for f in job.facts if f.event_type == JobCompleted.EVENT_TYPE]
        self.facts = [f for f in job.facts if f.event_type != JobCompleted.EVENT_TYPE]
        completion = None
        if completions:
            completion = decode_recorded(completions[0].event_type, completions[0].payload)
        if not isinstance(completion, JobCompleted):
            msg = f"job {job.job_id} is not complete: only completed jobs can be replayed"
            raise InvalidInput(msg)
        self.outcome.capture_mode = job.capture_mode
        self.outcome.snapshot_ids = {k.value: job.snapshot_ids.get(k.value) for k in SnapshotKind}
        rules = self.recorded_rules(job, step)
        detail = f"job {job.job_id}: seed {job.job_seed!r}, capture mode {job.capture_mode}"
        self.step(step, "ok", f"{detail}, {len(job.facts)} recorded events, sealed, {rules}")
        return job, completion

    def recorded_rules(self, job: Job, step: str) -> str:
        """Which rules the job was recorded under, when this ledger implements them."""
        if job.provenance is None:
            return f"rules not recorded (a job from before they were): taken as {SERIALIZER}"
        problem = unimplemented(job.provenance)
        if problem is not None:
            message = f"job {job.job_id} was recorded under {problem}, which this ledger does not"
            self.stop(ErrorCode.UNSUPPORTED_RULES, step, f"{message} implement")
        return f"recorded under {SERIALIZER} and its id generators"

    def required_snapshots(self, job: Job, completion: JobCompleted) -> dict[SnapshotKind, str]:
        """Seed 000 step 2, before any signature: a snapshot the ledger held and no longer does
        is MISSING_SNAPSHOT, named with what proves it was deleted (the newest checkpoint, else
        the job's own completion, which found it), and halted as a forged one is: deleting it
        altered the store."""
        step = "2 required snapshots"
        found = snapshots_found_at_completion(
            job.snapshot_ids, [m.model_dump() for m in completion.missing_artifacts]
        )
        ids: dict[SnapshotKind, str] = {}
        missing: list[str] = []
        for kind in SnapshotKind:
            snapshot_id = job.snapshot_ids.get(kind.value)
            if snapshot_id is None:
                missing.append(f"{kind.value} (not declared)")
                continue
            absent = self.source.snapshot_absent(snapshot_id)
            if absent is None:
                ids[kind] = snapshot_id
                continue
            proof = absent.deleted
            if proof is None and kind.value in found:
                proof = "the job found it in the ledger when it completed"
            if proof is None:
                missing.append(f"{kind.value} {snapshot_id} (not in the ledger)")
                continue
            missing.append(f"{kind.value} {snapshot_id} (deleted: {proof})")
            self.outcome.halt_snapshots.append(snapshot_id)
        for kind, snapshot_id in self.named_snapshots().items():
            absent = self.source.snapshot_absent(snapshot_id)
            if absent is not None:
                held = "not in the ledger" if absent.deleted is None else absent.deleted
                missing.append(f"{kind.value} {snapshot_id} (named by the what-if: {held})")
        if missing:
            self.stop(ErrorCode.MISSING_SNAPSHOT, step, "missing " + ", ".join(missing))
        named = len(self.named_snapshots())
        also = f", and the {named} the what-if names" if named else ""
        self.step(step, "ok", f"all {len(ids)} declared snapshots present{also}")
        return ids

    def named_snapshots(self) -> Mapping[SnapshotKind, str]:
        """The snapshots a what-if re-runs the job under instead of the declared ones."""
        changes = self.request.changes
        return {} if changes is None else changes.snapshots

    def no_force_halt(self, job: Job, ids: dict[SnapshotKind, str]) -> None:
        step = "2b force halts"
        for kind, snapshot_id in [*ids.items(), *self.named_snapshots().items()]:
            reason = self.source.halt_reason(job.tenant, snapshot_id)
            if reason is not None:
                message = (
                    f"{kind.value} snapshot {snapshot_id} is halted ({reason}) until the council"
                    " appends FORCE_HALT_CLEAR"
                )
                self.stop(ErrorCode.FORCE_HALT_REPLAY, step, message)
        self.step(step, "ok", "no declared snapshot is halted")

    def verified_snapshots(self, ids: dict[SnapshotKind, str]) -> Stage0Snapshots:
        step = "3 snapshot signatures"
        configs: dict[str, Any] = {}
        # The declared snapshots are verified first (the record must be intact), then those a
        # what-if names, which the re-run runs under in their place.
        for kind, snapshot_id in [*ids.items(), *self.named_snapshots().items()]:
            try:
                snapshot = self.source.load_snapshot(snapshot_id)
            except MaceError as exc:
                if exc.code is not ErrorCode.INTEGRITY_FAILURE:
                    raise
                self.outcome.halt_snapshots.append(snapshot_id)
                message = f"{kind.value} snapshot {snapshot_id}: {exc.message}"
                self.stop(ErrorCode.INTEGRITY_FAILURE, step, message)
            # Parsed once: the parse that says it is usable is the one the re-run runs under.
            config = _parsed(kind, snapshot)
            if isinstance(config, _Unusable):
                message = f"no usable {kind.value} snapshot: {snapshot_id} {config.problem}"
                self.stop(ErrorCode.MISSING_SNAPSHOT, step, message)
            configs[kind.value] = config
        parsed = Stage0Snapshots(**configs)
        self.seconds = parsed.governance.replay_max_seconds
        self.step(step, "ok", "every snapshot's signature and content address verified")
        return parsed

    def fork_prefix_snapshots(self, job: Job) -> None:
        """A fork (`domain.fork`) kept the iterations before the one it re-ran from as the job it
        forked recorded them, decided under that job's snapshots: they are re-run under those
        (present and verified as the declared ones are), the rest under the fork's own. A fork is
        a counterfactual: never authoritative."""
        lineage = lineage_of(job.provenance)
        if lineage is None:
            return
        self.outcome.non_authoritative.append(
            f"a fork of job {lineage.job_id}: its iterations before {lineage.iteration} are that"
            f" job's, the rest re-run under {lineage.changes or 'its snapshots'}"
            f"{' and another input' if lineage.input is not None else ''}; never authoritative"
        )
        if lineage.iteration == 0:
            return  # nothing kept: every iteration ran under the fork's own snapshots
        step = "3b fork prefix snapshots"
        configs: dict[str, Any] = {}
        for kind in SnapshotKind:
            snapshot_id = lineage.prefix_snapshot_ids.get(kind.value)
            absent = None if snapshot_id is None else self.source.snapshot_absent(snapshot_id)
            if snapshot_id is None or absent is not None:
                message = f"{kind.value} snapshot {snapshot_id} of fork's kept iterations is absent"
                self.stop(ErrorCode.MISSING_SNAPSHOT, step, message)
            try:
                config = _parsed(kind, self.source.load_snapshot(snapshot_id))
            except MaceError as exc:
                if exc.code is not ErrorCode.INTEGRITY_FAILURE:
                    raise
                self.outcome.halt_snapshots.append(snapshot_id)
                self.stop(ErrorCode.INTEGRITY_FAILURE, step, f"{kind.value}: {exc.message}")
            if isinstance(config, _Unusable):
                message = f"no usable {kind.value} snapshot: {snapshot_id} {config.problem}"
                self.stop(ErrorCode.MISSING_SNAPSHOT, step, message)
            configs[kind.value] = config
        self.fork_prefix = (lineage.iteration, Stage0Snapshots(**configs))
        detail = f"iterations before {lineage.iteration} re-run under job {lineage.job_id}'s"
        self.step(step, "ok", f"{detail} snapshots, verified")

    def ordered_events(self) -> list[tuple[int, RunEvent]]:
        """The job's events without its completion, in order, each decoded (once) here."""
        self.indexed = [
            (f.sequence_index, decode_recorded(f.event_type, f.payload)) for f in self.facts
        ]
        indexed = self.indexed
        self.step(
            "4 load ordered events",
            "ok",
            f"{len(indexed)} events in event_sequence_index order (0 to {len(indexed) - 1})",
        )
        return indexed

    def seed_rng(self, job: Job) -> None:
        detail = f"deterministic RNG seeded from job_seed {job.job_seed!r}"
        self.step("5 seed RNG", "ok", detail)

    def persisted_outputs(
        self, job: Job, events: Sequence[tuple[int, RunEvent]]
    ) -> list[MissingArtifact]:
        present = set(job.snapshot_ids.values())
        capture = CaptureMode(job.capture_mode)
        named = policy_bundles_named(e for _, e in events)
        changed = None if self.request.changes is None else self.request.changes.policy_bundle
        if (named or changed) and self.source.carries_tenant_state:
            self.bundles = self.source.policy_bundles(job.tenant)
        if changed is not None and changed not in self.bundles:
            # Another tenant's bundle is not held for this one: it behaves as a free hash.
            message = (
                f"policy bundle {changed} (named by the what-if) is not held for tenant"
                f" {job.tenant!r}"
            )
            self.stop(ErrorCode.MISSING_SNAPSHOT, "6 persisted outputs", message)
        # Bundles a source does not carry are not said to be missing: they may be in the ledger.
        held = set(self.bundles) if self.source.carries_tenant_state else named
        missing = [
            m
            for m in missing_artifacts(job.snapshot_ids, present, events, capture, held)
            if m.sequence_index is not None
        ]
        self.outcome.unreconstructable = missing
        outputs = sum(
            isinstance(e, AgentOutput | ModelCallEnvelope | ToolResult) for _, e in events
        )
        detail = f"{outputs - len(missing)} of {outputs} agent, model and tool outputs persisted"
        if missing:
            detail += f" (capture mode {job.capture_mode})"
        if self.request.mode is ReplayMode.PRODUCTION:
            # Tools and retrievals are re-applied from their recorded answers only: production
            # has nothing to re-apply for a call or request no answer follows, or a result kept
            # as its hash.
            for artifact in missing:
                if "policy_bundle" in artifact.missing:
                    message = (
                        f"{artifact.step} (event {artifact.sequence_index} {artifact.event_type})"
                        f": {artifact.reason}"
                    )
                    self.stop(ErrorCode.MISSING_SNAPSHOT, "6 persisted outputs", message)
                if artifact.event_type in _ANSWERED_EVENTS:
                    self.refuse_unpersisted(artifact, "6 persisted outputs")
        self.step("6 persisted outputs", "ok", detail)
        return missing

    def outside_facts(
        self, events: Sequence[tuple[int, RunEvent]], missing: list[MissingArtifact]
    ) -> None:
        """Facts from outside the runtime: tools re-applied from their recorded results (never a
        live call), every kept content against its hash, the tool and retrieval pairs checked
        again."""
        step = "6b outside facts"
        try:
            check_tool_boundary(tool_steps(e for _, e in events))
        except ToolBoundaryError as bad:
            where, event = events[bad.position]
            field = "retrieval_boundary" if isinstance(event, _RETRIEVALS) else "tool_boundary"
            self.diverge(
                Divergence(ErrorCode.REPLAY_DIVERGENCE, None, field, f"event {where}", str(bad))
            )
        unkept = {m.sequence_index: m for m in missing}
        self.retrievals(events)
        for index, event in events:
            if isinstance(event, ITERATION_EVENTS) or index in self.rows:
                continue
            if index in unkept:
                self.rows[index] = unpersisted(unkept[index], event)
                continue
            if (
                isinstance(event, GateDecision | PolicySnapshotRef)
                and event.policy_bundle_hash is not None
                and not self.source.carries_tenant_state
            ):
                subject = f"event {index} {event.EVENT_TYPE}"
                self.not_carried(index, subject, f"policy bundle {event.policy_bundle_hash}")
                continue
            try:
                self.rows[index] = outside_fact(index, event, self.deciding_bundles())
            except RecordMismatch as bad:
                self.differs(bad)
        outside = [row.check for row in self.rows.values()]
        counts = ", ".join(
            f"{outside.count(check)} {check.value}"
            for check in (Check.HASH_COMPARED, Check.TAKEN_AS_RECORDED, Check.MISSING)
        )
        self.step(step, "ok", f"{len(outside)} facts from outside the Stage-0 runtime: {counts}")

    def retrievals(self, events: Sequence[tuple[int, RunEvent]]) -> None:
        """Each retrieval served from the tenant's own memories served again, at the memory log
        position it names, and its hits compared with the response's (`domain.retrieval`)."""
        responses = {e.request_id: (i, e) for i, e in events if isinstance(e, RetrievalResponse)}
        tenant = self.tenant
        for index, request in events:
            if not isinstance(request, RetrievalRequest) or request.memory_position is None:
                continue
            answered = responses.get(request.request_id)
            if answered is None:
                continue  # its answer is missing (`unpersisted`), as a tool call's would be
            subject = f"event {index} RetrievalRequest"
            position = self.memory_version(request.memory_position)
            self.within_time(f"6b outside facts: retrieval event {index}")
            if not self.source.carries_tenant_state:
                self.not_carried(index, subject, "the tenant's memory log")
                continue
            try:
                request_checked(index, request)
                response_checked(*answered)
            except HashMismatch as bad:
                self.differs(bad)
                continue
            memories = self.source.memories_at(tenant, position)
            if memories is None:
                field = f"{subject} memory_position"
                self.diverge(Divergence(ErrorCode.REPLAY_DIVERGENCE, None, field, position, None))
                continue
            at, response = answered
            hits = ledger_hits(tenant, memories, request.query, request.max_entries)
            recorded = [hit.model_dump(mode="json") for hit in response.hits]
            if not same_hits(recorded, hits):
                self.diverge(
                    Divergence(
                        ErrorCode.REPLAY_DIVERGENCE,
                        None,
                        f"event {at} RetrievalResponse hits",
                        recorded,
                        hits,
                    )
                )
                continue
            served = (
                f"served again from the tenant's memory log at position {position}"
                f"{self.as_of_said()}; request_hash is the hash of its query"
            )
            self.rows[index] = FactCheck(subject, Check.REEXECUTED, served, index)
            matched = (
                f"{len(hits)} hits equal the re-served ones (scores within {SCORE_EPSILON:g});"
                " response_hash is the hash of its hits"
            ) + (
                "; retrieved_context_hashes taken as recorded"
                if response.retrieved_context_hashes
                else ""
            )
            self.rows[at] = FactCheck(
                f"event {at} RetrievalResponse", Check.REEXECUTED, matched, at
            )

    def memory_version(self, recorded: int) -> int:
        """The memory log version a retrieval is served from: the one it names, or, as of a
        point, the one the log had reached there."""
        as_of = self.request.as_of
        return recorded if as_of is None else as_of.memory_version

    def as_of_said(self) -> str:
        as_of = self.request.as_of
        return "" if as_of is None else f" (as of {as_of.point.label()})"

    def deciding_bundles(self) -> Mapping[str, str]:
        """The bundle each held hash's gates are decided under: its own, or, in a what-if that
        names a policy bundle, that one in place of every recorded one."""
        changed = None if self.request.changes is None else self.request.changes.policy_bundle
        if changed is None:
            return self.bundles
        return dict.fromkeys(self.bundles, self.bundles[changed])

    def differs(self, bad: RecordMismatch) -> None:
        self.diverge(
            Divergence(ErrorCode.REPLAY_DIVERGENCE, None, bad.field, bad.recorded, bad.replayed)
        )

    def not_carried(self, index: int, subject: str, what: str) -> None:
        """A fact decided by the tenant's state, which the replayed records do not hold."""
        detail = f"{what} is not among the records replayed: not decided again"
        self.rows[index] = FactCheck(subject, Check.TAKEN_AS_RECORDED, detail, index)
        reason = (
            "the tenant's memory log and policy bundles are not among the records replayed:"
            " what they decide is taken as recorded"
        )
        if reason not in self.outcome.non_authoritative:
            self.outcome.non_authoritative.append(reason)

    def close_checks(self) -> None:
        """Every recorded fact's row: a fact the replay did not reach is said to be unchecked."""
        diverged = {d.iteration for d in self.outcome.divergences}
        stopped_in: dict[int, list[tuple[int, RunEvent]]] = {}
        for index, event in self.indexed:
            if (
                index not in self.rows
                and isinstance(event, ITERATION_EVENTS)
                and event.iteration in diverged
            ):
                stopped_in.setdefault(event.iteration, []).append((index, event))
        for iteration, events in stopped_in.items():
            self.iteration_rows(iteration, events)
        rows = [
            self.rows.get(f.sequence_index) or unreached(f.sequence_index, f.event_type)
            for f in self.facts
        ]
        self.outcome.checks = rows + self.derived

    def iteration_rows(self, iteration: int, events: Sequence[tuple[int, RunEvent]]) -> None:
        """The rows of an iteration's events, once its comparisons ended (or stopped): in one
        that diverged, each event against the re-run's (`diverged_iteration_facts`), so that the
        table says what the step log says."""
        diverged = [d.field for d in self.outcome.divergences if d.iteration == iteration]
        if not diverged:
            for index, event in events:
                self.rows[index] = iteration_fact(index, event, iteration)
            return
        replayed = self.reruns.get(iteration)
        for row in diverged_iteration_facts(events, iteration, replayed, diverged):
            assert row.sequence_index is not None
            self.rows[row.sequence_index] = row

    def reducers(
        self,
        job: Job,
        snapshots: Stage0Snapshots,
        body: list[RunEvent],
        completion: JobCompleted,
    ) -> None:
        """Step 7: each reducer re-folded over the recorded events, held to the state the
        completion materialised by its digest (a model of the re-fold is built only to show
        one that differs)."""
        step = "7 reducers"
        replayed = {
            "selfrep": fold_selfrep(snapshots.selfrep, body),
            "brainstate": fold_brainstate(snapshots.brainstate, body, job.job_seed),
        }
        recorded = {"selfrep": completion.selfrep, "brainstate": completion.brainstate}
        for name, state in replayed.items():
            was = recorded[name]
            if was is None:
                self.step(
                    f"{step}: {name}", "skipped", "not materialised when the job was recorded"
                )
                continue
            subject = f"materialised {name}"
            folded = digest(state)
            if was.digest != folded:
                self.derived.append(FactCheck(subject, Check.DIVERGED, "re-folded: differs"))
                self.diverge(
                    Divergence(
                        ErrorCode.REPLAY_DIVERGENCE,
                        None,
                        f"materialised_{name}",
                        was.model_dump(),
                        MaterialisedState.of(state).model_dump(),
                    )
                )
                continue
            self.derived.append(FactCheck(subject, Check.REEXECUTED, "re-folded by the reducer"))
            self.step(f"{step}: {name}", "ok", f"materialised state digest {folded}")

    def iterations(
        self,
        job: Job,
        snapshots: Stage0Snapshots,
        body: list[RunEvent],
        missing: list[MissingArtifact],
    ) -> Any:
        """Step 8, every iteration; returns the final answer the replay computed (None: none
        could be)."""
        recorded = _by_iteration(body)
        if not recorded:
            detail = "the job recorded no iterations: there is no routing to re-decide"
            self.step("8 iterations", "skipped", detail)
        else:
            self.iterations_in_place(job, body, recorded)
        computed: Any = None
        limits = snapshots.governance
        for position, iteration in enumerate(sorted(recorded)):
            self.within_limits(position, iteration, limits.replay_max_iterations)
            events = recorded[iteration]
            trace = next(((i, e) for i, e in events if isinstance(e, IterationTrace)), None)
            percept = next(((i, e) for i, e in events if isinstance(e, InputReceived)), None)
            under = snapshots
            if self.fork_prefix is not None and iteration < self.fork_prefix[0]:
                under = self.fork_prefix[1]
            run = None if percept is None else self.rerun(job, under, body, *percept)
            self.reruns[iteration] = None if run is None else run.events
            replayed = (
                None
                if run is None
                else next(e for e in run.events if isinstance(e, IterationTrace))
            )
            sem = None if run is None else partial(self.compare_sem, job, iteration, events, run)
            self.compare_iteration(iteration, trace, replayed, missing, sem)
            if run is not None:
                self.compare_events(iteration, events, run.events)
                self.sem_written.update({entry.key: entry for entry in run.sem_writes})
            self.iteration_rows(iteration, [(self.indexed[at][0], event) for at, event in events])
            computed = None if run is None else run.final_output
        if self.request.mode is ReplayMode.PRODUCTION and missing:
            self.refuse_unpersisted(missing[0])
        return computed

    def iterations_in_place(
        self, job: Job, body: list[RunEvent], recorded: dict[int, list[tuple[int, RunEvent]]]
    ) -> None:
        """The iterations a run recorded are 0, 1, 2, ... one after the other in the stream, as
        the runtime runs them, and the first took in the job's input: a run that skips, reorders
        or interleaves iterations, or whose input is not what its first iteration read, is not
        the run its answer and its iterations' re-runs stand for."""
        in_stream = [e.iteration for e in body if isinstance(e, ITERATION_EVENTS)]
        expected = list(range(len(recorded)))
        if sorted(recorded) != expected or in_stream != sorted(in_stream):
            shown = [n for at, n in enumerate(in_stream) if at == 0 or in_stream[at - 1] != n]
            self.diverge(
                Divergence(ErrorCode.REPLAY_DIVERGENCE, None, "iterations", shown, expected)
            )
        first = next((e for _, e in recorded.get(0, []) if isinstance(e, InputReceived)), None)
        if first is not None and first.text != job.job_input:
            self.diverge(
                Divergence(ErrorCode.REPLAY_DIVERGENCE, 0, "job_input", job.job_input, first.text)
            )

    def within_limits(self, position: int, iteration: int, cap: int) -> None:
        where = f"8 iteration {iteration}"
        if position >= cap:
            message = f"iteration cap {cap} (governance snapshot) reached at iteration {iteration}"
            self.stop(ErrorCode.REPLAY_TIMEOUT, f"{where}: limits", message)
        self.within_time(where)

    def rerun(
        self,
        job: Job,
        snapshots: Stage0Snapshots,
        body: list[RunEvent],
        start: int,
        percept: InputReceived,
    ) -> Stage0Run:
        """The iteration as the live path computes it: after the events recorded before it, with
        memory as the ledger held it for this iteration (`memory`).

        A recorded router (stored before its rules were checked) may be too costly to re-decide
        on the recorded input: the replay stops, bounded, with REPLAY_TIMEOUT."""
        # A what-if's later iteration follows what its earlier ones did under the change.
        before = self.as_rerun(body[:start]) if self.request.counterfactual else body[:start]
        try:
            return run_iteration(
                job.job_id,
                job.job_seed,
                percept,
                before,
                snapshots,
                self.memory(job, body[start:]),
                CaptureMode(job.capture_mode),
                self.agents(percept.iteration),
            )
        except UnroutableText as exc:
            where = f"8 iteration {percept.iteration}: limits"
            self.stop(ErrorCode.REPLAY_TIMEOUT, where, f"routing budget: {exc}")

    def as_rerun(self, events: list[RunEvent]) -> list[RunEvent]:
        """``events`` with each re-run iteration's recorded events replaced by its re-run's."""
        shown: list[RunEvent] = []
        placed: set[int] = set()
        for event in events:
            if not isinstance(event, ITERATION_EVENTS) or self.reruns.get(event.iteration) is None:
                shown.append(event)
            elif event.iteration not in placed:
                placed.add(event.iteration)
                shown.extend(self.reruns[event.iteration] or [])
        return shown

    def memory(self, job: Job, ahead: list[RunEvent]) -> SemSource:
        """SEM as the tenant's log held it where the ledger recorded the job, with the writes
        the re-run made in earlier iterations (`replay_sem`); without the tenant's SEM log (a
        bundle), as the run says it met it, and the verdict says so."""
        if self.source.carries_tenant_state:
            return MemoryAtPosition(
                self.source, job.tenant, lambda: self.recorded_at(job), self.sem_written
            )
        if any(isinstance(e, SemRead | SemWrite) for e in ahead):
            reason = (
                "the tenant's SEM log is not among the records replayed: SEM reads and writes"
                " are rebuilt from the versions the run says it met (taken as recorded)"
            )
            if reason not in self.outcome.non_authoritative:
                self.outcome.non_authoritative.append(reason)
        return MemoryAsRecorded(self.source, job.tenant, ahead)

    def recorded_at(self, job: Job) -> int:
        """Where the ledger recorded the job in its log, read when SEM is first met; as of a
        point, just after that point (versions placed at or before it are the ones met)."""
        if self.request.as_of is not None:
            return self.request.as_of.log_position + 1
        if self.job_position is None:
            self.job_position = self.source.job_position(job)
        return self.job_position

    def compare_sem(
        self, job: Job, iteration: int, events: list[tuple[int, RunEvent]], run: Stage0Run
    ) -> None:
        """The iteration's SEM facts, each named by its key (`replay_sem.sem_differences`)."""
        held = self.source.carries_tenant_state
        recorded = [event for _, event in events]
        for field_name, claimed, met in sem_differences(
            self.source if held else None, job.tenant, job.job_id, recorded, run.events
        ):
            self.diverge(
                Divergence(ErrorCode.REPLAY_DIVERGENCE, iteration, field_name, claimed, met),
                _SEM_AS_HELD if held else "",
            )

    def compare_events(
        self, iteration: int, events: list[tuple[int, RunEvent]], replayed: list[RunEvent]
    ) -> None:
        """The run's own events of the iteration (``events``: by their positions in the job's)
        against the re-run, type by type, then their order: a trace that agrees with the re-run
        proves nothing about events that do not."""
        for kind in _COMPARED_EVENTS:
            was_at = [(at, e) for at, e in events if isinstance(e, kind)]
            now_events = [e for e in replayed if isinstance(e, kind)]
            name = f"events.{kind.EVENT_TYPE}"
            if not self.stored_as_rerun(was_at, now_events):
                was = [e.payload() for _, e in was_at]
                now = [e.payload() for e in now_events]
                if canonical_json(was) != canonical_json(now):
                    self.diverge(Divergence(ErrorCode.REPLAY_DIVERGENCE, iteration, name, was, now))
                    continue
            self.step(f"8 iteration {iteration}: {name}", "ok", "the events match the re-run")
        recorded = [e for _, e in events]
        was_order = [e.EVENT_TYPE for e in recorded]
        now_order = [e.EVENT_TYPE for e in replayed]
        if was_order != now_order:
            self.diverge(
                Divergence(
                    ErrorCode.REPLAY_DIVERGENCE, iteration, "events.order", was_order, now_order
                )
            )
        else:
            self.step(f"8 iteration {iteration}: events.order", "ok", "in the re-run's order")

    def agents(self, iteration: int) -> Mapping[str, Agent]:
        if not self.request.mocks:
            return AGENTS
        modules = dict(AGENTS)
        for name, reply in self.request.mocks.items():
            modules[name] = self._mock(name, reply, iteration)
        return modules

    def _mock(self, name: str, reply: AgentReply, iteration: int) -> Agent:
        def answer(request: AgentRequest, memory: Memory) -> AgentReply:
            # Recorded as it happens, so a replay that stops later still carries the badge.
            reason = f"{name} answered by a declared mock in iteration {iteration}"
            self.outcome.non_authoritative.append(reason)
            return reply

        return answer

    def stored_as_rerun(
        self, recorded: Sequence[tuple[int, RunEvent]], rerun: Sequence[RunEvent]
    ) -> bool:
        """Whether the recorded events (by their positions in the job's) are stored exactly as
        the re-run wrote its own, one for one: then every field of each equals the re-run's
        in canonical form, and none needs comparing on its own.

        The re-run wrote each of its events' payload canonically when it made it (and kept the
        bytes); the stored payload, written by orjson as it was read (keys sorted, every value
        of the type it had), is compared with those bytes: equal bytes are equal values, so
        their canonical forms are equal field by field. Where they differ (a value stored
        otherwise, or one orjson writes in another form than the canonical one), the caller
        compares field by field, which decides and names what differs. The re-run's input is
        the recorded event itself (`run_iteration` perceives it as recorded): the same object."""
        return len(recorded) == len(rerun) and all(
            event is again
            or (
                type(event) is type(again)
                and _stored_bytes(self.facts[at].payload) == again.written_payload().data
            )
            for (at, event), again in zip(recorded, rerun, strict=True)
        )

    def compare_iteration(
        self,
        iteration: int,
        trace: tuple[int, IterationTrace] | None,
        rerun: IterationTrace | None,
        missing: list[MissingArtifact],
        sem: Callable[[], None] | None = None,
    ) -> None:
        """Each seed 004 section 5 field of the recorded trace (at its position in the job's
        events) against the re-run's: all of them at once when the trace is stored as the
        re-run writes it (`stored_as_rerun`), else one by one, the first that differs diverging.
        ``sem`` compares the iteration's SEM facts where the run met them: after the routing
        (``router_decision``, ``selected_agents``), before the agents' outputs, so a what-if
        whose routing changed names the routing first, not a read the new route no longer makes."""
        if trace is None or rerun is None:
            if sem is not None:
                sem()
            self.diverge(
                Divergence(
                    ErrorCode.REPLAY_DIVERGENCE,
                    iteration,
                    "iteration_trace",
                    None if trace is None else trace[1].trace_entry(),
                    None if rerun is None else rerun.trace_entry(),
                )
            )
            return
        same = self.stored_as_rerun([trace], [rerun])
        recorded = {} if same else trace[1].trace_entry()
        replayed = {} if same else rerun.trace_entry()
        for name in EQUALITY_FIELDS:
            if not same and canonical_json(recorded[name]) != canonical_json(replayed[name]):
                self.diverge(
                    Divergence(
                        ErrorCode.REPLAY_DIVERGENCE, iteration, name, recorded[name], replayed[name]
                    )
                )
            else:
                self.step(f"8 iteration {iteration}: {name}", "ok", "matches the record")
            if name == "router_decision" and self.request.mode is ReplayMode.PRODUCTION:
                self.production_outputs(iteration, missing)
            if name == "selected_agents" and sem is not None:
                sem()

    def production_outputs(self, iteration: int, missing: list[MissingArtifact]) -> None:
        """Production never re-creates an output that was not persisted (seed 000 section 7)."""
        for artifact in missing:
            if artifact.event_type == AgentOutput.EVENT_TYPE and artifact.step.startswith(
                f"iteration {iteration} "
            ):
                self.refuse_unpersisted(artifact)
        self.step(
            f"8 iteration {iteration}: persisted agent outputs", "ok", "every output persisted"
        )

    def refuse_unpersisted(
        self, artifact: MissingArtifact, step: str = "8 persisted agent outputs"
    ) -> NoReturn:
        message = (
            f"{artifact.step} (event {artifact.sequence_index}): {', '.join(artifact.missing)}"
            f" not persisted: {artifact.reason}"
        )
        self.stop(ErrorCode.MISSING_PERSISTED_AGENT_OUTPUT, step, message)

    def final_answer(self, computed: Any, completion: JobCompleted) -> None:
        step = "9 final answer"
        if computed is None:
            detail = "no iteration was re-run, so the recorded answer is not reproduced"
            self.derived.append(FactCheck("final answer", Check.TAKEN_AS_RECORDED, detail))
            self.step(step, "skipped", detail)
            self.outcome.non_authoritative.append(f"final answer: {detail}")
            return
        if canonical_json(computed) != canonical_json(completion.final_output):
            self.derived.append(FactCheck("final answer", Check.DIVERGED, "re-computed: differs"))
            self.diverge(
                Divergence(
                    ErrorCode.RESULT_MISMATCH,
                    None,
                    "final_answer",
                    completion.final_output,
                    computed,
                )
            )
            return
        self.derived.append(
            FactCheck("final answer", Check.REEXECUTED, "the last iteration's answer, re-computed")
        )
        self.step(step, "ok", "the computed final answer equals the stored final_answer")

    def finish(self) -> None:
        """The verdict: authoritative only when no recorded fact is one only the run vouches for
        (`projections.replay_checks` draws that line) nor one it left out, however the rest
        reproduced."""
        rows = sorted(self.rows.items())
        vouched = [row.subject for _, row in rows if row.check is Check.TAKEN_AS_RECORDED]
        if vouched:
            facts = "fact" if len(vouched) == 1 else "facts"
            self.outcome.non_authoritative.append(
                f"{len(vouched)} {facts} only the run vouches for, taken as recorded:"
                f" {', '.join(vouched)}"
            )
        unanswered = [row.subject for _, row in rows if row.check is Check.MISSING]
        if unanswered:
            self.outcome.non_authoritative.append(
                f"missing from the record: {', '.join(unanswered)}"
            )
        if not any(r.check in _RE_EXECUTED for r in self.rows.values()):
            self.outcome.non_authoritative.append(
                "none of the run's events was re-executed: each was taken as recorded or"
                " compared by its hash"
            )
        if self.request.counterfactual:
            as_of = self.request.as_of is not None and self.request.changes is None
            self.outcome.non_authoritative.append(AS_OF_REASON if as_of else WHATIF_REASON)
            changed = len(self.outcome.divergences)
            self.step("result", "ok", f"{changed} difference(s) {self.under()}")
            return
        if self.outcome.divergences:
            first = self.outcome.divergences[0]
            self.outcome.error_code = first.code
            self.outcome.error_message = (
                f"forced replay found {len(self.outcome.divergences)} divergence(s)"
            )
            self.outcome.non_authoritative.append(
                "forced past divergences with a council-approved force-continue"
            )
            self.step("result", "failed", self.outcome.error_message)
            return
        if not any(r.check is Check.REEXECUTED for r in self.rows.values()):
            self.step("result", "failed", f"{NOT_REPRODUCED}: {NOT_REPRODUCED_WHY}")
            return
        self.step("result", "ok", "replay reproduced the job")


def _by_iteration(body: list[RunEvent]) -> dict[int, list[tuple[int, RunEvent]]]:
    """The Stage-0 events of each iteration, with their positions in the job's events."""
    grouped: dict[int, list[tuple[int, RunEvent]]] = {}
    for position, event in enumerate(body):
        if isinstance(event, ITERATION_EVENTS):
            grouped.setdefault(event.iteration, []).append((position, event))
    return grouped


@dataclass(frozen=True, slots=True)
class _Unusable:
    problem: str


def _stored_bytes(payload: dict[str, Any]) -> bytes | None:
    """A recorded payload as orjson writes it, keys sorted (`_Replay.stored_as_rerun`); None for one
    nested deeper than orjson writes (the canonical encoder writes such values itself)."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return None


PARSED_KEPT: Final = 64
"""Parsed snapshots a process keeps (`_parsed`)."""
_PARSED: dict[tuple[SnapshotKind, str], tuple[dict[str, Any], Any]] = {}


def _parsed(kind: SnapshotKind, snapshot: Snapshot) -> Any:
    """The snapshot as its kind's config (`parse_config`, as recorded), or why it is unusable.

    Parsed once for the snapshot a source returns for every job naming it (an audit's replays
    share their reads, a process keeps the snapshots it verified): its payload, the very object
    parsed, is never changed, so the parse holds for as long as it is that object. Configs are
    frozen; the run reads them."""
    if snapshot.kind != kind.value:
        return _Unusable(f"is a {snapshot.kind} snapshot")
    key = (kind, snapshot.snapshot_id)
    kept = _PARSED.get(key)
    if kept is not None and kept[0] is snapshot.payload:
        return kept[1]
    try:
        config = parse_config(kind, snapshot.payload, recorded=True)
    except ValueError as exc:
        return _Unusable(f"cannot be read as a {kind.value} snapshot: {str(exc).splitlines()[0]}")
    if len(_PARSED) >= PARSED_KEPT:
        _PARSED.clear()  # a process that meets ever new snapshots keeps a few
    _PARSED[key] = (snapshot.payload, config)
    return config
