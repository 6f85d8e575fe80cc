"""The Stage-0 runtime: one job, from its input to its final answer, as an ordered list of events.

The live run and a replay both call `run_iteration` (a live job is one iteration: `run_stage0`).
It reads the snapshots and SEM, never the clock or the outside world, and returns what happened
instead of storing it. The caller stores the events and the SEM writes in one transaction (live)
or compares them with the record, iteration by iteration (replay). The SelfRepresentation and
BrainState it decides with are folded, by the reducers, from the events before the iteration and
the very events it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from domain.canonical import digest
from domain.capture import apply_capture
from domain.events import (
    AgentOutput,
    InputReceived,
    IterationTrace,
    MaterialisedState,
    RouterDecision,
    RunEvent,
    SemRead,
    SemWrite,
    hash_of,
)
from domain.job import CaptureMode
from domain.sem import (
    MISS,
    SemEntry,
    SemKeyError,
    SemRecord,
    SemValueError,
    SemVocabulary,
    canonical_key,
)
from domain.snapshot import SnapshotKind
from domain.stage0.agents import AGENTS, Agent, AgentReply, AgentRequest, CannotHandle
from domain.stage0.config import (
    BrainStateConfig,
    GovernanceConfig,
    PrivacyPolicy,
    PrivacyRefusal,
    RouterConfig,
    SelfRepConfig,
    parse_config,
)
from domain.stage0.refusals import RefusedValue, value_text
from domain.stage0.router import decide
from projections.brainstate import fold_brainstate
from projections.selfrep import available_agents, fold_selfrep


@dataclass(frozen=True, slots=True)
class Stage0Snapshots:
    """The five snapshots a job runs under, parsed."""

    selfrep: SelfRepConfig
    brainstate: BrainStateConfig
    router: RouterConfig
    privacy: PrivacyPolicy
    governance: GovernanceConfig

    @classmethod
    def parse(
        cls, payloads: dict[SnapshotKind, dict[str, Any]], *, recorded: bool = False
    ) -> Stage0Snapshots:
        """``recorded``: the snapshots of a recorded job, read to replay it (`parse_config`)."""
        parsed = {
            kind.value: parse_config(kind, payloads[kind], recorded=recorded)
            for kind in SnapshotKind
        }
        return cls(**parsed)


class SemSource(Protocol):
    """One tenant's SEM: a job reads and writes the entries of its own tenant only."""

    @property
    def tenant(self) -> str:
        """Whose entries these are; the entries a job writes are this tenant's."""

    def entry(self, key: str) -> SemEntry | None:
        """The tenant's stored entry under a canonical key, as a fresh object the caller may
        change."""


class RecordingMemory:
    """The agents' `Memory`: canonical keys, the privacy policy, and every access an event.

    Writes go to `SemEntry` aggregates held here until the caller stores them with the job; a
    read of a key this job wrote sees that write.
    """

    def __init__(
        self,
        source: SemSource,
        vocabulary: SemVocabulary,
        privacy: PrivacyPolicy,
        emit: Callable[[RunEvent], None],
        iteration: int,
        writer: str,
    ) -> None:
        self._source = source
        self._vocabulary = vocabulary
        self._privacy = privacy
        self._emit = emit
        self._iteration = iteration
        self._writer = writer
        self.written: dict[str, SemEntry] = {}
        self.read_versions: dict[str, int] = {}
        """The version of each key read from the source (0: a miss), the first time it was."""
        self.refused: list[RefusedValue] = []
        self.source_failure: Exception | None = None

    def key(self, raw: str) -> str:
        return canonical_key(raw, self._vocabulary)

    def _entry(self, key: str) -> SemEntry | None:
        if key in self.written:
            return self.written[key]
        try:
            return self._source.entry(key)
        except Exception as exc:
            self.source_failure = exc  # the store failed, not the agent: see `_dispatch`
            raise

    def read(self, key: str) -> SemRecord:
        entry = self._entry(key)
        if key not in self.written:
            self.read_versions.setdefault(key, 0 if entry is None else entry.version)
        record = MISS if entry is None else entry.read()
        self._emit(SemRead(iteration=self._iteration, key=key, **record.as_json()))
        return record

    def write(self, raw: str, value: Any) -> tuple[str, SemRecord | None]:
        try:
            key = self.key(raw)
            self._privacy.check_storable(key)
            entry = self._entry(key)
            if entry is None:
                entry = SemEntry.first_write(self._source.tenant, key, value, self._writer)
            else:
                entry.write(value, self._writer)
        except (SemKeyError, SemValueError) as exc:
            if isinstance(exc, PrivacyRefusal):
                self.refused.append(RefusedValue(exc.attribute, value_text(value)))
            self._emit(
                SemWrite(
                    iteration=self._iteration,
                    key=raw,
                    value=value,
                    status="failed",
                    reason=str(exc),
                )
            )
            return raw, None
        self.written[key] = entry
        record = entry.read()
        self._emit(
            SemWrite(
                iteration=self._iteration,
                key=key,
                value=record.value,
                status="written",
                last_updated=record.last_updated,
            )
        )
        return key, record


@dataclass
class Stage0Run:
    """What one job did: its events in order (as captured), the SEM writes to store, the
    version of each key it only read (its commit checks they still stand), and the values the
    privacy policy refused to store."""

    events: list[RunEvent] = field(default_factory=list)
    final_output: str = ""
    sem_writes: list[SemEntry] = field(default_factory=list)
    sem_reads: dict[str, int] = field(default_factory=dict)
    refused: list[RefusedValue] = field(default_factory=list)
    brainstate_after: MaterialisedState | None = None
    """The BrainState folded over ``events``, as the iteration trace holds it."""


def run_stage0(
    job_id: str,
    job_seed: str,
    text: str,
    user: str,
    snapshots: Stage0Snapshots,
    source: SemSource,
    capture_mode: CaptureMode,
    agents: Mapping[str, Agent] = AGENTS,
) -> Stage0Run:
    """Run a live Stage-0 job: its one iteration, from nothing recorded before it."""
    percept = InputReceived(iteration=0, text=text, user=user)
    return run_iteration(job_id, job_seed, percept, (), snapshots, source, capture_mode, agents)


def run_iteration(
    job_id: str,
    job_seed: str,
    percept: InputReceived,
    before: Sequence[RunEvent],
    snapshots: Stage0Snapshots,
    source: SemSource,
    capture_mode: CaptureMode,
    agents: Mapping[str, Agent] = AGENTS,
) -> Stage0Run:
    """Run one Stage-0 iteration: perceive, route, dispatch (with F3/F4 fallbacks), trace.

    ``before``: the job's events ahead of this iteration, which the reducers fold first (a
    replay of a later iteration passes what was recorded). ``agents``: the modules by name; a
    reexecute replay passes declared mocks in some places.
    """
    run = Stage0Run()

    def emit(event: RunEvent) -> None:
        run.events.append(apply_capture(event, capture_mode))

    def so_far() -> list[RunEvent]:
        return [*before, *run.events]

    iteration, text, user = percept.iteration, percept.text, percept.user
    brainstate_before = fold_brainstate(snapshots.brainstate, before, job_seed)
    emit(percept)
    selfrep = fold_selfrep(snapshots.selfrep, so_far())
    # F3 covers both: an agent the SelfRepresentation does not offer, and one with no module.
    decision = decide(snapshots.router, text, available_agents(selfrep) & agents.keys())
    routed = RouterDecision(
        iteration=iteration,
        rule_id=decision.rule_id,
        agent=decision.agent,
        why=decision.why,
        fallback=decision.fallback,
    )
    emit(routed)
    memory = RecordingMemory(
        source,
        snapshots.brainstate.sem,
        snapshots.privacy,
        emit,
        iteration,
        writer=f"job:{job_id}",
    )
    request = AgentRequest(text=text, user=user, vocabulary=snapshots.brainstate.sem)
    selected = [decision.agent]
    reply, status = _dispatch(
        agents[decision.agent], decision.agent, request, memory, iteration, emit
    )
    if status != "ok":
        fallback = AgentRequest(
            text=text,
            user=user,
            vocabulary=snapshots.brainstate.sem,
            after_failure=status == "failed",
        )
        selected.append("generic_agent")
        reply, _ = _dispatch(
            agents["generic_agent"], "generic_agent", fallback, memory, iteration, emit
        )
    assert reply is not None  # generic_agent always answers
    brainstate_after = MaterialisedState.of(
        fold_brainstate(snapshots.brainstate, so_far(), job_seed)
    )
    emit(
        IterationTrace(
            iteration=iteration,
            router_decision=routed.trace_entry(),
            selected_agents=selected,
            agent_outputs=[e.trace_entry() for e in run.events if isinstance(e, AgentOutput)],
            sem_reads=[e.trace_entry() for e in run.events if isinstance(e, SemRead)],
            sem_writes=[e.trace_entry() for e in run.events if isinstance(e, SemWrite)],
            final_output=reply.text,
            council_votes=[],
            claims=reply.claims,
            evidence_items=reply.evidence,
            # Each state as its `MaterialisedState` dumps: no model is made of the state before,
            # which nothing keeps, nor a dump of the one after, the very values it holds.
            brainstate_before={"digest": digest(brainstate_before), "state": brainstate_before},
            brainstate_after={"digest": brainstate_after.digest, "state": brainstate_after.state},
        )
    )
    run.final_output = reply.text
    run.sem_writes = list(memory.written.values())
    run.sem_reads = {k: v for k, v in memory.read_versions.items() if k not in memory.written}
    run.refused = memory.refused
    run.brainstate_after = brainstate_after
    return run


def _dispatch(
    module: Agent,
    agent: str,
    request: AgentRequest,
    memory: RecordingMemory,
    iteration: int,
    emit: Callable[[RunEvent], None],
) -> tuple[AgentReply | None, str]:
    """Call one agent and record its output; F3 if it declines, F4 if it raises."""
    prompt = {"text": request.text, "user": request.user, "after_failure": request.after_failure}
    reply: AgentReply | None = None
    error: str | None = None
    try:
        reply = module(request, memory)
        status = "ok"
    except CannotHandle:
        status = "declined"
    except Exception as exc:  # F4: any failure of a module degrades it, the job goes on
        if exc is memory.source_failure:
            # Memory could not be read (an integrity failure, an unreachable store): that is no
            # module's fault, and a job that cannot read its facts cannot be recorded at all.
            raise
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    response = (
        None
        if reply is None
        else {"text": reply.text, "claims": reply.claims, "evidence": reply.evidence}
    )
    emit(
        AgentOutput(
            iteration=iteration,
            agent=agent,
            status=status,
            prompt=prompt,
            response=response,
            # The event computes the hash of what it holds; no response is hashed as null.
            response_hash=hash_of(None) if response is None else None,
            error=error,
        )
    )
    return reply, status
