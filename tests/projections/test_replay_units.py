"""Replay's pure parts, without a store: access, the replay record, memory as recorded, the
algorithm of seed 000 section 6 over an in-memory `ReplaySource`, and the report.

Jobs are built the way the ledger builds them (``Job.start``, `run_stage0` under the default
snapshots, every event recorded, the `complete_job` verdict, sealed), but held in memory; the
fake source hands out those aggregates and whatever failures a test asks for.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic import JsonValue
from support.forbidden_calls import forbid_nondeterminism
from support.replay_steps import event_steps
from support.stage0_support import InMemorySem

from domain.canonical import canonical_json
from domain.determinism import DeterministicClock, iso_text
from domain.errors import ErrorCode, MaceError
from domain.events import (
    EQUALITY_FIELDS,
    IterationTrace,
    JobCompleted,
    MissingArtifact,
    ModelCallEnvelope,
    RetrievalRequest,
    RetrievalResponse,
    RunEvent,
    SemRead,
    SemWrite,
    ToolCall,
    ToolResult,
    hash_of,
    hits_hash,
)
from domain.governance import Actor, Role
from domain.job import DEFAULT_TENANT, CaptureMode, Job
from domain.memories import Memory as StoredMemory
from domain.replay_access import REPLAY_ROLES, ReplayMode, parse_mode, replay_refusal
from domain.replay_record import ReplayRecord, replay_record_name
from domain.sem import SemEntry
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.agents import AgentReply
from infrastructure.application.snapshots import default_snapshots
from projections.reflective_log import complete_job
from projections.replay import (
    Absent,
    Divergence,
    ReplayOutcome,
    ReplayRequest,
    StepLog,
    replay_job,
)
from projections.replay_checks import Check, FactCheck
from projections.replay_report import REPORT_VERSION, render_markdown, replay_report
from projections.replay_sem import MemoryAsRecorded, MemoryAtPosition, sem_claim_problem
from projections.stage0_runtime import Stage0Snapshots, run_stage0

# --------------------------------------------------------------------------------------------
# domain.replay_access
# --------------------------------------------------------------------------------------------

ROLE_SETS = [
    frozenset(combo)
    for size in range(1, len(Role) + 1)
    for combo in itertools.combinations([r.value for r in Role], size)
]
REPLAYERS = {r.value for r in REPLAY_ROLES}


def may_replay(mode: ReplayMode, roles: frozenset[str], production_approved: bool) -> bool:
    """Seed 000 section 10, written out independently of the product code."""
    any_replay_role = bool(roles & {"operator", "admin", "auditor"})
    if mode is ReplayMode.PRODUCTION:
        return {"admin", "auditor"} <= roles or (production_approved and any_replay_role)
    return any_replay_role


def test_the_role_sets_cover_every_non_empty_combination() -> None:
    assert len(ROLE_SETS) == 31  # five roles; store_operator grants no replay
    assert {"operator", "admin", "auditor"} == REPLAYERS


@pytest.mark.parametrize("production_approved", [False, True])
@pytest.mark.parametrize("roles", ROLE_SETS, ids=lambda r: "+".join(sorted(r)))
@pytest.mark.parametrize("mode", list(ReplayMode))
def test_replay_refusal_matrix(
    mode: ReplayMode, roles: frozenset[str], production_approved: bool
) -> None:
    actor = Actor.of("kim", sorted(roles))
    refusal = replay_refusal(mode, actor, production_approved)
    if may_replay(mode, roles, production_approved):
        assert refusal is None
        return
    held = sorted(roles)
    if mode is ReplayMode.PRODUCTION:
        assert refusal == (
            "production replay needs an actor holding admin and auditor, or a council approval"
            f" of production_replay for this job; kim holds {held}"
        )
    else:
        assert refusal == (
            f"{mode.value} replay needs one of the roles ['admin', 'auditor', 'operator'];"
            f" kim holds {held}"
        )


def test_the_exact_refusal_for_audit_and_reexecute() -> None:
    council = Actor.of("ada", ["council"])
    assert replay_refusal(ReplayMode.AUDIT, council, True) == (
        "audit replay needs one of the roles ['admin', 'auditor', 'operator']; ada holds"
        " ['council']"
    )
    assert replay_refusal(ReplayMode.REEXECUTE, council, False) == (
        "reexecute replay needs one of the roles ['admin', 'auditor', 'operator']; ada holds"
        " ['council']"
    )


def test_the_exact_refusal_for_production() -> None:
    admin = Actor.of("ops", ["admin", "council"])
    assert replay_refusal(ReplayMode.PRODUCTION, admin, False) == (
        "production replay needs an actor holding admin and auditor, or a council approval of"
        " production_replay for this job; ops holds ['admin', 'council']"
    )


def test_production_cases_spelled_out() -> None:
    assert replay_refusal(ReplayMode.PRODUCTION, Actor.of("a", ["admin", "auditor"]), False) is None
    assert replay_refusal(ReplayMode.PRODUCTION, Actor.of("o", ["operator"]), True) is None
    assert replay_refusal(ReplayMode.PRODUCTION, Actor.of("o", ["operator"]), False) is not None
    # A council approval does not let the council itself replay: it holds no replay role.
    assert replay_refusal(ReplayMode.PRODUCTION, Actor.of("c", ["council"]), True) is not None


@pytest.mark.parametrize("mode", ["audit", "reexecute", "production"])
def test_parse_mode_accepts_the_three_modes(mode: str) -> None:
    assert parse_mode(mode) is ReplayMode(mode)


@pytest.mark.parametrize("mode", ["", "Audit", "prod", "sandbox", "audit "])
def test_parse_mode_refuses_anything_else(mode: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_mode(mode)
    assert str(caught.value) == (
        f"unknown replay mode {mode!r}: expected one of ['audit', 'reexecute', 'production']"
    )


# --------------------------------------------------------------------------------------------
# domain.replay_record
# --------------------------------------------------------------------------------------------


STEPS = [
    ("1 load reflective log", "ok", "job job-1"),
    ("2 required snapshots", "ok", "all 5 declared snapshots present"),
    ("2b force halts", "failed", "FORCE_HALT_REPLAY: halted"),
    ("1 load reflective log", "ok", "a repeated name is kept as a new step"),
]


def test_a_replay_record_is_named_after_job_and_attempt() -> None:
    record = ReplayRecord.recorded("job-1", 3, "audit", [], {"ok": True}, "# ok\n")
    assert replay_record_name("job-1", 3) == "job-1#3"
    assert (record.replay_id, record.job_id, record.attempt, record.mode) == (
        "job-1#3",
        "job-1",
        3,
        "audit",
    )
    assert record.id == ReplayRecord.id_for("job-1#3")


def test_a_record_is_one_event_with_every_step_in_order_and_the_report() -> None:
    record = ReplayRecord.recorded("job-1", 1, "production", STEPS, {"ok": False}, "# report\n")
    assert record.steps == [{"step": s, "outcome": o, "detail": d} for s, o, d in STEPS]
    assert (record.report, record.markdown) == ({"ok": False}, "# report\n")

    events: list[Any] = list(record.collect_events())
    assert [type(e).__name__ for e in events] == ["Opened"]
    assert record.clock_seed == "replay:job-1#1"
    assert events[0].timestamp == DeterministicClock(record.clock_seed).at(1)
    loaded = events[0].mutate(None)
    assert isinstance(loaded, ReplayRecord)
    assert (loaded.steps, loaded.report, loaded.markdown) == (
        record.steps,
        record.report,
        record.markdown,
    )


def test_a_record_written_step_by_step_before_still_loads() -> None:
    """Version 1: an opening event without steps, one event per step, then the report."""
    opened = ReplayRecord.Opened.upcast_v1_v2  # the upcast a stored version 1 event goes through
    state: dict[str, Any] = {"replay_id": "job-1#1", "job_id": "job-1", "attempt": 1, "mode": "a"}
    opened(state)
    record = ReplayRecord(**state)
    for step in STEPS:
        record._step_logged(step=step[0], outcome=step[1], detail=step[2])
    record._report_stored(report={"ok": True}, markdown="# ok\n")
    assert record.steps == [{"step": s, "outcome": o, "detail": d} for s, o, d in STEPS]
    assert (record.report, record.markdown) == ({"ok": True}, "# ok\n")


# --------------------------------------------------------------------------------------------
# projections.replay_sem
# --------------------------------------------------------------------------------------------

COLOR = "user/person/default/favorite_color"
CITY = "user/person/default/city"


class FakeSemHistory:
    """`SemHistory` over real SEM aggregates' events, key by key, each placed in one log in the
    order it was added (a job recorded between is `mark`ed there); it counts what is asked."""

    def __init__(self, *entries: SemEntry) -> None:
        self.events: dict[str, list[SemEntry.Event]] = {}
        self.positions: dict[str, dict[int, int]] = {}
        self.asked: list[str] = []
        self.log_size = 0
        for entry in entries:
            self.add(entry)

    def add(self, entry: SemEntry) -> None:
        collected = [e for e in entry.collect_events() if isinstance(e, SemEntry.Event)]
        self.events.setdefault(entry.key, []).extend(collected)
        for event in collected:
            self.positions.setdefault(entry.key, {})[event.originator_version] = self.mark()

    def mark(self) -> int:
        """The next position in the log (where a job recorded now stands)."""
        self.log_size += 1
        return self.log_size

    def sem_events(self, tenant: str, key: str) -> Sequence[SemEntry.Event]:
        assert tenant == DEFAULT_TENANT
        self.asked.append(key)
        return list(self.events.get(key, []))

    def sem_positions(self, tenant: str, key: str) -> dict[int, int]:
        assert tenant == DEFAULT_TENANT
        return dict(self.positions.get(key, {}))


def written(values: Sequence[str], key: str = COLOR) -> tuple[SemEntry, list[str]]:
    """A SEM entry written each value in turn, and the ``last_updated`` stamp of each version."""
    entry = SemEntry.first_write(DEFAULT_TENANT, key, values[0], "job:earlier")
    stamps = [entry.read().last_updated]
    for value in values[1:]:
        entry.write(value, "job:earlier")
        stamps.append(entry.read().last_updated)
    assert all(stamps)
    return entry, [s for s in stamps if s is not None]


def read_event(key: str, value: Any, stamp: str | None) -> SemRead:
    return SemRead(iteration=0, key=key, exists=stamp is not None, value=value, last_updated=stamp)


def write_event(key: str, value: Any, stamp: str | None, status: str = "written") -> SemWrite:
    return SemWrite.model_validate(
        {"iteration": 0, "key": key, "value": value, "status": status, "last_updated": stamp}
    )


def test_stamps_are_the_key_clock_per_version() -> None:
    _, stamps = written(["red", "blue", "green"])
    clock = DeterministicClock(f"sem:{COLOR}")
    assert stamps == [iso_text(clock.at(v)) for v in (1, 2, 3)]


@pytest.mark.parametrize(("version", "value"), [(1, "red"), (2, "blue"), (3, "green")])
def test_a_recorded_read_gives_the_version_it_read(version: int, value: str) -> None:
    entry, stamps = written(["red", "blue", "green"])
    history = FakeSemHistory(entry)
    memory = MemoryAsRecorded(
        history, DEFAULT_TENANT, [read_event(COLOR, value, stamps[version - 1])]
    )
    seen = memory.entry(COLOR)
    assert seen is not None
    assert (seen.version, seen.value, seen.key) == (version, value, COLOR)
    assert seen.read().last_updated == stamps[version - 1]
    assert history.asked == [COLOR]


def test_a_recorded_write_gives_the_version_before_it() -> None:
    entry, stamps = written(["red", "blue", "green"])
    memory = MemoryAsRecorded(
        FakeSemHistory(entry), DEFAULT_TENANT, [write_event(COLOR, "green", stamps[2])]
    )
    seen = memory.entry(COLOR)
    assert seen is not None
    assert (seen.version, seen.value) == (2, "blue")
    assert seen.read().last_updated == stamps[1]


def test_a_recorded_first_write_of_a_key_gives_no_entry() -> None:
    entry, stamps = written(["red", "blue"])
    memory = MemoryAsRecorded(
        FakeSemHistory(entry), DEFAULT_TENANT, [write_event(COLOR, "red", stamps[0])]
    )
    assert memory.entry(COLOR) is None


def test_a_recorded_miss_gives_no_entry_even_if_the_key_was_written_since() -> None:
    entry, _ = written(["red", "blue"])
    memory = MemoryAsRecorded(
        FakeSemHistory(entry), DEFAULT_TENANT, [read_event(COLOR, None, None)]
    )
    assert memory.entry(COLOR) is None


def test_a_key_the_job_never_touched_gives_no_entry() -> None:
    color, stamps = written(["red"])
    city, _ = written(["Paris"], CITY)
    history = FakeSemHistory(color, city)
    memory = MemoryAsRecorded(history, DEFAULT_TENANT, [read_event(COLOR, "red", stamps[0])])
    assert memory.entry(CITY) is None
    assert MemoryAsRecorded(history, DEFAULT_TENANT, []).entry(COLOR) is None
    assert history.asked == []


@pytest.mark.parametrize("kind", ["read", "write"])
def test_a_stamp_no_version_carries_gives_no_entry(kind: str) -> None:
    # An emitter's claim, never an integrity failure: the re-run meets no entry and differs
    # from the claim where it uses it.
    entry, stamps = written(["red", "blue"])
    foreign = DeterministicClock("another-seed").iso(2)
    assert foreign not in stamps
    event: RunEvent = (
        read_event(COLOR, "blue", foreign) if kind == "read" else write_event(COLOR, "x", foreign)
    )
    assert MemoryAsRecorded(FakeSemHistory(entry), DEFAULT_TENANT, [event]).entry(COLOR) is None
    unheld = [read_event(COLOR, "red", stamps[0])]
    assert MemoryAsRecorded(FakeSemHistory(), DEFAULT_TENANT, unheld).entry(COLOR) is None


def test_memory_at_a_position_is_the_log_before_it_whatever_the_run_claims() -> None:
    entry, _ = written(["red", "blue"])
    history = FakeSemHistory(entry)
    job_at = history.mark()
    entry.write("green", "job:later")
    history.add(entry)
    seen = MemoryAtPosition(history, DEFAULT_TENANT, lambda: job_at, {}).entry(COLOR)
    assert seen is not None
    assert (seen.version, seen.value) == (2, "blue")
    assert MemoryAtPosition(history, DEFAULT_TENANT, lambda: 1, {}).entry(COLOR) is None
    assert MemoryAtPosition(history, DEFAULT_TENANT, lambda: job_at, {}).entry(CITY) is None


def test_memory_at_a_position_holds_the_jobs_earlier_writes_over_the_log() -> None:
    entry, _ = written(["red"])
    history = FakeSemHistory(entry)
    job_at = history.mark()
    own, _ = written(["mine"])
    memory = MemoryAtPosition(history, DEFAULT_TENANT, lambda: job_at, {COLOR: own})
    first = memory.entry(COLOR)
    assert first is not None and first.value == "mine"
    first.write("changed by the re-run", "job:replay")
    again = memory.entry(COLOR)
    assert again is not None and again.value == "mine"


def test_a_claim_the_sem_log_contradicts_is_named() -> None:
    entry, stamps = written(["red", "blue"])
    history = FakeSemHistory(entry)
    foreign = DeterministicClock("another-seed").iso(2)
    assert (
        sem_claim_problem(history, DEFAULT_TENANT, "j", read_event(COLOR, "red", stamps[0])) is None
    )
    assert sem_claim_problem(history, DEFAULT_TENANT, "j", read_event(COLOR, None, None)) is None
    problems = [
        sem_claim_problem(history, DEFAULT_TENANT, "j", event)
        for event in (
            read_event(COLOR, "blue", foreign),
            read_event(COLOR, "blue", stamps[0]),
            write_event(COLOR, "blue", stamps[1]),
            write_event(COLOR, "x", foreign),
        )
    ]
    assert problems == [
        f"reads {COLOR} at {foreign}, a version the ledger does not hold",
        f'reads {COLOR} at {stamps[0]} as "blue", but that version holds "red"',
        f"writes {COLOR} at {stamps[1]}, a version the ledger stored for job:earlier, not for"
        " this run",
        f"writes {COLOR} at {foreign}, a version the ledger does not hold (a run recorded from"
        " outside does not write the tenant's SEM)",
    ]
    assert (
        sem_claim_problem(history, DEFAULT_TENANT, "earlier", write_event(COLOR, "blue", stamps[1]))
        is None
    )


def test_the_first_meeting_with_a_key_decides() -> None:
    entry, stamps = written(["red", "blue", "green"])
    history = FakeSemHistory(entry)
    read_then_write = [read_event(COLOR, "red", stamps[0]), write_event(COLOR, "blue", stamps[1])]
    seen = MemoryAsRecorded(history, DEFAULT_TENANT, read_then_write).entry(COLOR)
    assert seen is not None
    assert (seen.version, seen.value) == (1, "red")
    # A failed write read nothing the job kept: the read after it decides.
    failed_first = [write_event(COLOR, 7, None, "failed"), read_event(COLOR, "blue", stamps[1])]
    seen = MemoryAsRecorded(history, DEFAULT_TENANT, failed_first).entry(COLOR)
    assert seen is not None
    assert (seen.version, seen.value) == (2, "blue")


def test_each_call_gives_a_fresh_entry() -> None:
    entry, stamps = written(["red", "blue"])
    memory = MemoryAsRecorded(
        FakeSemHistory(entry), DEFAULT_TENANT, [read_event(COLOR, "red", stamps[0])]
    )
    first = memory.entry(COLOR)
    assert first is not None
    first.write("changed by the replay", "job:replay")
    again = memory.entry(COLOR)
    assert again is not None
    assert (again.version, again.value) == (1, "red")


# --------------------------------------------------------------------------------------------
# projections.replay.replay_job over an in-memory source
# --------------------------------------------------------------------------------------------

SNAPSHOTS = default_snapshots()
IDS = {kind.value: snapshot.snapshot_id for kind, snapshot in SNAPSHOTS.items()}
PARSED = Stage0Snapshots.parse({kind: s.payload for kind, s in SNAPSHOTS.items()})
ROUTER_ID = IDS["router"]

Tamper = Callable[[list[RunEvent]], list[RunEvent]]


def recorded_job(
    text: str,
    *,
    sem: InMemorySem | None = None,
    capture: CaptureMode = CaptureMode.FULL_IO,
    tamper: Tamper | None = None,
    final_output: Any = None,
    snapshot_ids: dict[str, str] | None = None,
    complete: bool = True,
) -> tuple[Job, list[SemEntry]]:
    """A sealed job recorded as the ledger records one, and the SEM entries its run wrote."""
    ids = IDS if snapshot_ids is None else snapshot_ids
    job = Job.start("job-1", "s1", text, ids, capture)
    run = run_stage0("job-1", "s1", text, "default", PARSED, sem or InMemorySem(), capture)
    events = run.events if tamper is None else tamper(list(run.events))
    for event in events:
        job.record(event.EVENT_TYPE, event.payload())
    if complete:
        answer = run.final_output if final_output is None else final_output
        verdict = complete_job(job, answer, set(ids.values()), PARSED.selfrep, PARSED.brainstate)
        job.record(JobCompleted.EVENT_TYPE, verdict.payload())
    job.seal(job.version, "0" * 64)
    return job, run.sem_writes


class FakeSource:
    """A `ReplaySource` over aggregates held in memory; it logs every call it answers."""

    def __init__(
        self,
        job: Job,
        *,
        snapshots: dict[str, Snapshot] | None = None,
        halts: dict[str, str] | None = None,
        broken: dict[str, MaceError] | None = None,
        sem: FakeSemHistory | None = None,
        job_error: MaceError | None = None,
        job_at: int | None = None,
    ) -> None:
        """``job_at``: where the job stands in the SEM history's log (default: after it all)."""
        self.job = job
        self.snapshots = (
            {s.snapshot_id: s for s in SNAPSHOTS.values()} if snapshots is None else snapshots
        )
        self.halts = halts or {}
        self.broken = broken or {}
        self.sem = sem or FakeSemHistory()
        self.job_at = self.sem.mark() if job_at is None else job_at
        self.job_error = job_error
        self.calls: list[str] = []

    def load_job(self, job_id: str) -> Job:
        self.calls.append(f"load_job {job_id}")
        if self.job_error is not None:
            raise self.job_error
        return self.job

    def snapshot_absent(self, snapshot_id: str) -> Absent | None:
        self.calls.append(f"snapshot_absent {snapshot_id}")
        return None if snapshot_id in self.snapshots else Absent()

    def load_snapshot(self, snapshot_id: str) -> Snapshot:
        self.calls.append(f"load_snapshot {snapshot_id}")
        if snapshot_id in self.broken:
            raise self.broken[snapshot_id]
        return self.snapshots[snapshot_id]

    def halt_reason(self, tenant: str, snapshot_id: str) -> str | None:
        assert tenant == self.job.tenant
        self.calls.append(f"halt_reason {snapshot_id}")
        return self.halts.get(snapshot_id)

    carries_tenant_state = True

    def policy_bundles(self, tenant: str) -> dict[str, str]:
        assert tenant == self.job.tenant
        self.calls.append("policy_bundles")
        return {}

    def memories_at(self, tenant: str, position: int) -> list[StoredMemory] | None:
        assert tenant == self.job.tenant
        self.calls.append(f"memories_at {position}")
        return None

    def sem_events(self, tenant: str, key: str) -> Sequence[SemEntry.Event]:
        self.calls.append(f"sem_events {key}")
        return self.sem.sem_events(tenant, key)

    def sem_positions(self, tenant: str, key: str) -> dict[int, int]:
        return self.sem.sem_positions(tenant, key)

    def job_position(self, job: Job) -> int:
        assert job is self.job
        self.calls.append("job_position")
        return self.job_at


def audit(
    source: FakeSource, *, mode: ReplayMode = ReplayMode.AUDIT, **options: Any
) -> ReplayOutcome:
    return replay_job(source, ReplayRequest("job-1", mode, **options))


def step_names(outcome: ReplayOutcome) -> list[str]:
    return [s.step for s in outcome.steps]


SUCCESS_STEPS = [
    "1 load reflective log",
    "2 required snapshots",
    "2b force halts",
    "3 snapshot signatures",
    "4 load ordered events",
    "5 seed RNG",
    "6 persisted outputs",
    "6b outside facts",
    "7 reducers: selfrep",
    "7 reducers: brainstate",
    *(f"8 iteration 0: {name}" for name in EQUALITY_FIELDS),
    *event_steps(0),
    "9 final answer",
    "result",
]


def test_the_equality_fields_are_seed_004s_eleven() -> None:
    assert len(EQUALITY_FIELDS) == 11


@pytest.mark.parametrize("text", ["2 + 3", "hello", "what is the capital of France"])
def test_a_successful_replay_logs_every_step_in_seed_order(text: str) -> None:
    job, _ = recorded_job(text)
    outcome = audit(FakeSource(job))
    assert step_names(outcome) == SUCCESS_STEPS
    assert [s.outcome for s in outcome.steps] == ["ok"] * len(SUCCESS_STEPS)
    assert outcome.ok
    assert outcome.error_code is None
    assert outcome.error_message is None
    assert outcome.divergences == []
    assert outcome.authoritative
    assert outcome.non_authoritative == []
    assert outcome.unreconstructable == []
    assert outcome.halt_snapshots == []
    assert outcome.capture_mode == "full_io"
    assert outcome.snapshot_ids == IDS
    details = {s.step: s.detail for s in outcome.steps}
    assert details["1 load reflective log"] == (
        f"job job-1: seed 's1', capture mode full_io, {len(job.facts)} recorded events, sealed,"
        " recorded under mace-canonical-json/1 and its id generators"
    )
    assert details["2 required snapshots"] == "all 5 declared snapshots present"
    assert details["2b force halts"] == "no declared snapshot is halted"
    body = len(job.facts) - 1
    assert details["4 load ordered events"] == (
        f"{body} events in event_sequence_index order (0 to {body - 1})"
    )
    assert details["5 seed RNG"] == "deterministic RNG seeded from job_seed 's1'"
    assert details["9 final answer"] == "the computed final answer equals the stored final_answer"
    assert details["result"] == "replay reproduced the job"


def test_the_checks_reach_the_source_in_seed_order() -> None:
    job, _ = recorded_job("2 + 3")
    source = FakeSource(job)
    audit(source)
    ordered = [IDS[kind.value] for kind in SnapshotKind]
    assert source.calls == [
        "load_job job-1",
        *(f"snapshot_absent {sid}" for sid in ordered),
        *(f"halt_reason {sid}" for sid in ordered),
        *(f"load_snapshot {sid}" for sid in ordered),
    ]


def test_a_production_replay_also_checks_the_persisted_agent_outputs() -> None:
    job, _ = recorded_job("2 + 3")
    outcome = audit(FakeSource(job), mode=ReplayMode.PRODUCTION)
    expected = list(SUCCESS_STEPS)
    expected.insert(
        expected.index("8 iteration 0: router_decision") + 1,
        "8 iteration 0: persisted agent outputs",
    )
    assert step_names(outcome) == expected
    assert outcome.ok
    assert outcome.authoritative


def test_a_production_replay_refuses_an_output_that_was_not_persisted() -> None:
    job, _ = recorded_job("2 + 3", capture=CaptureMode.PROMPTS_ONLY)
    outcome = audit(FakeSource(job), mode=ReplayMode.PRODUCTION)
    assert outcome.error_code is ErrorCode.MISSING_PERSISTED_AGENT_OUTPUT
    assert outcome.steps[-1].step == "8 persisted agent outputs"
    assert outcome.steps[-1].outcome == "failed"
    assert outcome.steps[-1].detail.startswith("MISSING_PERSISTED_AGENT_OUTPUT: iteration 0 ")
    # The same job replays in audit mode; what cannot be reconstructed is listed.
    audited = audit(FakeSource(job))
    assert audited.ok
    assert [m.event_type for m in audited.unreconstructable] == ["AgentOutput"]
    assert audited.unreconstructable == outcome.unreconstructable


def test_a_sem_read_replays_against_memory_as_the_job_saw_it() -> None:
    entry, _ = written(["red", "blue"])
    job, _ = recorded_job("what is my favorite color", sem=InMemorySem(entry))
    history = FakeSemHistory(entry)
    job_at = history.mark()
    entry.write("green", "job:later")  # memory changed after the job ran
    history.add(entry)
    source = FakeSource(job, sem=history, job_at=job_at)
    outcome = audit(source)
    assert outcome.ok, outcome.steps[-1]
    assert step_names(outcome) == SUCCESS_STEPS
    assert f"sem_events {COLOR}" in source.calls


def test_a_sem_write_replays_over_the_history_that_followed() -> None:
    job, writes = recorded_job("my favorite color is blue")
    assert [w.key for w in writes] == [COLOR]
    stored = writes[0]
    history = FakeSemHistory()
    job_at = history.mark()  # the job's own write is stored after its first record
    history.add(stored)
    stored.write("green", "job:later")
    history.add(stored)
    outcome = audit(FakeSource(job, sem=history, job_at=job_at))
    assert outcome.ok, outcome.steps[-1]
    assert step_names(outcome) == SUCCESS_STEPS


def test_a_job_that_meets_no_sem_reads_no_log_position() -> None:
    job, _ = recorded_job("2 + 3")
    source = FakeSource(job)
    assert audit(source).ok
    assert "job_position" not in source.calls
    sem_job, _ = recorded_job("what is my favorite color")
    source = FakeSource(sem_job)
    audit(source)
    assert source.calls.count("job_position") == 1


def test_a_sem_write_the_ledger_never_made_for_the_job_diverges() -> None:
    job, writes = recorded_job("my favorite color is blue")
    outcome = audit(FakeSource(job))  # the ledger holds no version of the key
    (divergence,) = outcome.divergences
    assert (divergence.field, divergence.iteration) == (f"sem_write {COLOR}", 0)
    stamp = writes[0].read().last_updated
    assert divergence.recorded == {"value": "blue", "last_updated": stamp, "source": "job:job-1"}
    assert divergence.replayed is None


def test_a_sem_read_the_ledger_does_not_back_diverges_never_an_integrity_failure() -> None:
    entry, _ = written(["red", "blue"])
    job, _ = recorded_job("what is my favorite color", sem=InMemorySem(entry))
    # The SEM log holds no version of the key: every divergence, listed by a forced replay.
    outcome = audit(FakeSource(job), force_continue=True, force_approved=True)
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    reads = next(d for d in outcome.divergences if d.field == "sem_reads")
    assert (reads.iteration, reads.recorded[0]["value"], reads.replayed[0]["exists"]) == (
        0,
        "blue",
        False,
    )


def test_missing_snapshots_stop_the_replay() -> None:
    """The job's completion found the router snapshot: gone now, it was deleted, and halted."""
    job, _ = recorded_job("2 + 3")
    present = {s.snapshot_id: s for k, s in SNAPSHOTS.items() if k is not SnapshotKind.ROUTER}
    source = FakeSource(job, snapshots=present)
    outcome = audit(source)
    message = (
        f"missing router {ROUTER_ID} (deleted: the job found it in the ledger when it completed)"
    )
    assert outcome.error_code is ErrorCode.MISSING_SNAPSHOT
    assert outcome.error_message == message
    assert step_names(outcome) == ["1 load reflective log", "2 required snapshots"]
    assert outcome.steps[-1] == StepLog(
        "2 required snapshots", "failed", f"MISSING_SNAPSHOT: {message}"
    )
    assert outcome.halt_snapshots == [ROUTER_ID]
    assert not outcome.ok
    assert not any(c.startswith(("load_snapshot", "halt_reason")) for c in source.calls)


def test_undeclared_and_unstored_snapshots_are_all_listed() -> None:
    declared = {k: v for k, v in IDS.items() if k != "governance"}
    job, _ = recorded_job("2 + 3", snapshot_ids=declared)
    present = {s.snapshot_id: s for k, s in SNAPSHOTS.items() if k is not SnapshotKind.SELFREP}
    outcome = audit(FakeSource(job, snapshots=present))
    assert outcome.error_code is ErrorCode.MISSING_SNAPSHOT
    assert outcome.error_message == (
        f"missing selfrep {IDS['selfrep']} (deleted: the job found it in the ledger when it"
        " completed), governance (not declared)"
    )


def test_a_snapshot_of_the_wrong_kind_is_missing() -> None:
    job, _ = recorded_job("2 + 3")
    swapped = {s.snapshot_id: s for s in SNAPSHOTS.values()}
    swapped[ROUTER_ID] = SNAPSHOTS[SnapshotKind.SELFREP]
    outcome = audit(FakeSource(job, snapshots=swapped))
    assert outcome.error_code is ErrorCode.MISSING_SNAPSHOT
    assert outcome.error_message == (
        f"no usable router snapshot: {ROUTER_ID} is a selfrep snapshot"
    )
    assert outcome.steps[-1].step == "3 snapshot signatures"
    assert outcome.halt_snapshots == []


def test_a_halted_snapshot_stops_the_replay() -> None:
    job, _ = recorded_job("2 + 3")
    source = FakeSource(job, halts={ROUTER_ID: "INTEGRITY_FAILURE: MAC mismatch"})
    outcome = audit(source)
    message = (
        f"router snapshot {ROUTER_ID} is halted (INTEGRITY_FAILURE: MAC mismatch) until the"
        " council appends FORCE_HALT_CLEAR"
    )
    assert outcome.error_code is ErrorCode.FORCE_HALT_REPLAY
    assert outcome.error_message == message
    assert step_names(outcome) == SUCCESS_STEPS[:3]
    assert outcome.steps[-1] == StepLog("2b force halts", "failed", f"FORCE_HALT_REPLAY: {message}")
    assert outcome.halt_snapshots == []  # already halted: nothing new to halt
    assert not any(c.startswith("load_snapshot") for c in source.calls)


def test_a_halt_stops_even_a_forced_replay() -> None:
    job, _ = recorded_job("2 + 3")
    source = FakeSource(job, halts={IDS["governance"]: "SECURITY_INCIDENT: leaked key"})
    outcome = audit(source, force_continue=True, force_approved=True)
    assert outcome.error_code is ErrorCode.FORCE_HALT_REPLAY


def test_a_signature_failure_stops_the_replay_and_names_the_snapshot_to_halt() -> None:
    job, _ = recorded_job("2 + 3")
    failure = MaceError(ErrorCode.INTEGRITY_FAILURE, "signature does not verify")
    outcome = audit(FakeSource(job, broken={ROUTER_ID: failure}))
    message = f"router snapshot {ROUTER_ID}: signature does not verify"
    assert outcome.error_code is ErrorCode.INTEGRITY_FAILURE
    assert outcome.error_message == message
    assert outcome.halt_snapshots == [ROUTER_ID]
    assert step_names(outcome) == SUCCESS_STEPS[:4]
    assert outcome.steps[-1] == StepLog(
        "3 snapshot signatures", "failed", f"INTEGRITY_FAILURE: {message}"
    )


def test_a_snapshot_read_failing_otherwise_is_not_swallowed() -> None:
    job, _ = recorded_job("2 + 3")
    failure = MaceError(ErrorCode.MISSING_SNAPSHOT, "vanished")
    with pytest.raises(MaceError) as caught:
        audit(FakeSource(job, broken={ROUTER_ID: failure}))
    assert caught.value is failure


def test_a_job_stream_failing_verification_stops_at_step_one() -> None:
    job, _ = recorded_job("2 + 3")
    failure = MaceError(ErrorCode.INTEGRITY_FAILURE, "MAC mismatch at version 3")
    outcome = audit(FakeSource(job, job_error=failure))
    assert outcome.error_code is ErrorCode.INTEGRITY_FAILURE
    assert outcome.steps == [
        StepLog(
            "1 load reflective log",
            "failed",
            "INTEGRITY_FAILURE: job stream: MAC mismatch at version 3",
        )
    ]
    assert outcome.halt_snapshots == []


def test_an_incomplete_job_is_not_replayed() -> None:
    job, _ = recorded_job("2 + 3", complete=False)
    with pytest.raises(ValueError) as caught:
        audit(FakeSource(job))
    assert str(caught.value) == "job job-1 is not complete: only completed jobs can be replayed"


def tampered_trace(events: list[RunEvent]) -> list[RunEvent]:
    return [
        e.model_copy(update={"final_output": "2 + 3 = 6"}) if isinstance(e, IterationTrace) else e
        for e in events
    ]


def test_a_divergence_stops_the_replay_with_its_diff() -> None:
    job, _ = recorded_job("2 + 3", tamper=tampered_trace)
    outcome = audit(FakeSource(job))
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert outcome.error_message == "iteration 0: final_output differs from the record"
    assert [d.as_json() for d in outcome.divergences] == [
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": 0,
            "field": "final_output",
            "recorded": "2 + 3 = 6",
            "replayed": "2 + 3 = 5",
        }
    ]
    assert canonical_json(outcome.divergences[0].as_json()) == (
        b'{"code":"REPLAY_DIVERGENCE","field":"final_output","iteration":0,'
        b'"recorded":"2 + 3 = 6","replayed":"2 + 3 = 5"}'
    )
    assert outcome.steps[-1] == StepLog(
        "compare final_output (iteration 0)",
        "failed",
        "REPLAY_DIVERGENCE: iteration 0: final_output differs from the record",
    )
    assert "9 final answer" not in step_names(outcome)


def test_a_different_final_answer_is_a_result_mismatch() -> None:
    job, _ = recorded_job("2 + 3", final_output="2 + 3 = 6")
    outcome = audit(FakeSource(job))
    assert outcome.error_code is ErrorCode.RESULT_MISMATCH
    assert [d.as_json() for d in outcome.divergences] == [
        {
            "code": "RESULT_MISMATCH",
            "iteration": None,
            "field": "final_answer",
            "recorded": "2 + 3 = 6",
            "replayed": "2 + 3 = 5",
        }
    ]
    assert outcome.steps[-1] == StepLog(
        "compare final_answer (job)",
        "failed",
        "RESULT_MISMATCH: job: final_answer differs from the record",
    )


def test_force_continue_without_governance_approval_is_refused() -> None:
    job, _ = recorded_job("2 + 3", tamper=tampered_trace)
    outcome = audit(FakeSource(job), force_continue=True, force_approved=False)
    assert outcome.error_code is ErrorCode.FORCE_CONTINUE_REQUIRED
    assert outcome.error_message == (
        "iteration 0: final_output differs from the record; continuing needs an admin's"
        " force-continue request and a council approval for this job in its governance record"
    )
    assert outcome.steps[-1].step == "compare final_output (iteration 0)"


def test_an_approved_force_continue_runs_to_the_end_and_is_not_authoritative() -> None:
    job, _ = recorded_job("2 + 3", tamper=tampered_trace, final_output="2 + 3 = 6")
    outcome = audit(FakeSource(job), force_continue=True, force_approved=True)
    assert [(d.code, d.field) for d in outcome.divergences] == [
        (ErrorCode.REPLAY_DIVERGENCE, "final_output"),
        (ErrorCode.RESULT_MISMATCH, "final_answer"),
    ]
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert outcome.error_message == "forced replay found 2 divergence(s)"
    assert not outcome.authoritative
    assert outcome.non_authoritative == [
        "forced past divergences with a council-approved force-continue"
    ]
    assert outcome.steps[-1] == StepLog("result", "failed", "forced replay found 2 divergence(s)")
    forced = [s for s in outcome.steps if s.step.startswith("compare ")]
    assert [s.detail for s in forced] == [
        "REPLAY_DIVERGENCE: iteration 0: final_output differs from the record (forced: continuing)",
        "RESULT_MISMATCH: job: final_answer differs from the record (forced: continuing)",
    ]


def test_an_approved_force_continue_without_divergence_stays_authoritative() -> None:
    job, _ = recorded_job("2 + 3")
    outcome = audit(FakeSource(job), force_continue=True, force_approved=True)
    assert outcome.ok
    assert outcome.authoritative
    assert step_names(outcome) == SUCCESS_STEPS


def test_the_time_cap_stops_the_replay() -> None:
    job, _ = recorded_job("2 + 3")
    outcome = audit(FakeSource(job), elapsed=lambda: 1e9)
    cap = PARSED.governance.replay_max_seconds
    assert outcome.error_code is ErrorCode.REPLAY_TIMEOUT
    assert outcome.error_message == f"replay time cap {cap:g} s (governance snapshot) exceeded"
    # Checked as each step ends, from the moment the governance snapshot gives the cap.
    assert outcome.steps[-1].step == "3 snapshot signatures: limits"


def test_the_time_cap_is_checked_between_steps_too() -> None:
    """A replay that passes the cap while it re-folds its reducers stops before it re-runs an
    iteration."""
    job, _ = recorded_job("2 + 3")
    clock = iter([0.0] * 6)
    outcome = audit(FakeSource(job), elapsed=lambda: next(clock, 1e9))
    assert outcome.error_code is ErrorCode.REPLAY_TIMEOUT
    assert not any(step.step.startswith("8 ") for step in outcome.steps[:-1])


def test_replay_job_reads_no_wall_clock_and_no_unseeded_randomness() -> None:
    entry, _ = written(["red", "blue"])
    job, _ = recorded_job("what is my favorite color", sem=InMemorySem(entry))
    diverging, _ = recorded_job("2 + 3", tamper=tampered_trace, final_output="x")
    history = FakeSemHistory(entry)
    sources = [FakeSource(job, sem=history), FakeSource(diverging), FakeSource(diverging)]
    with forbid_nondeterminism():
        good = audit(sources[0], mode=ReplayMode.PRODUCTION)
        forced = audit(sources[1], force_continue=True, force_approved=True)
        stopped = audit(sources[2])
    assert good.ok
    assert len(forced.divergences) == 2
    assert stopped.error_code is ErrorCode.REPLAY_DIVERGENCE


def test_the_same_replay_gives_the_same_outcome() -> None:
    job, _ = recorded_job("hello")
    assert audit(FakeSource(job)) == audit(FakeSource(job))


# --------------------------------------------------------------------------------------------
# projections.replay_report
# --------------------------------------------------------------------------------------------

ANA = Actor.of("ana", ["auditor", "admin"])


def handmade_outcome() -> ReplayOutcome:
    return ReplayOutcome(
        "job-1",
        ReplayMode.REEXECUTE,
        steps=[
            StepLog("1 load reflective log", "ok", "job job-1 | sealed"),
            StepLog("7 reducers: selfrep", "skipped", "not materialised"),
            StepLog("compare claims (iteration 0)", "failed", "REPLAY_DIVERGENCE: claims differ"),
            StepLog("result", "failed", "forced replay found 2 divergence(s)"),
        ],
        divergences=[
            Divergence(ErrorCode.REPLAY_DIVERGENCE, 0, "claims", [{"v": 1.5, "a": "x"}], []),
            Divergence(ErrorCode.RESULT_MISMATCH, None, "final_answer", "5", None),
        ],
        error_code=ErrorCode.REPLAY_DIVERGENCE,
        error_message="forced replay found 2 divergence(s)",
        non_authoritative=[
            "math_agent answered by a declared mock in iteration 0",
            "forced past divergences with a council-approved force-continue",
        ],
        unreconstructable=[
            MissingArtifact(
                sequence_index=3,
                event_type="AgentOutput",
                step="iteration 0 math_agent",
                missing=["response"],
                reason="capture mode prompts_only stores the hash of response only",
            )
        ],
        capture_mode="prompts_only",
        snapshot_ids={"router": "r" * 64, "selfrep": None},
        checks=[
            FactCheck("event 0 InputReceived", Check.DIVERGED, "the re-run differs", 0),
            FactCheck("event 1 GateDecision", Check.TAKEN_AS_RECORDED, "not | re-evaluated", 1),
            FactCheck("final answer", Check.DIVERGED, "re-computed: differs"),
        ],
    )


def test_the_report_holds_every_fact_of_the_outcome() -> None:
    report = replay_report(handmade_outcome(), ANA, 7, True, "acme")
    assert report == {
        "report_version": REPORT_VERSION,
        "uri": "mace://acme/job/job-1/replay/7/report",
        "tenant": "acme",
        "job_id": "job-1",
        "attempt": 7,
        "mode": "reexecute",
        "actor": {"actor_id": "ana", "roles": ["admin", "auditor"]},
        "force_continue": True,
        "ok": False,
        "error_code": "REPLAY_DIVERGENCE",
        "error_message": "forced replay found 2 divergence(s)",
        "authoritative": False,
        "non_authoritative_reasons": [
            "math_agent answered by a declared mock in iteration 0",
            "forced past divergences with a council-approved force-continue",
        ],
        "capture_mode": "prompts_only",
        "snapshot_ids": {"router": "r" * 64, "selfrep": None},
        "steps": [
            {"step": "1 load reflective log", "outcome": "ok", "detail": "job job-1 | sealed"},
            {"step": "7 reducers: selfrep", "outcome": "skipped", "detail": "not materialised"},
            {
                "step": "compare claims (iteration 0)",
                "outcome": "failed",
                "detail": "REPLAY_DIVERGENCE: claims differ",
            },
            {
                "step": "result",
                "outcome": "failed",
                "detail": "forced replay found 2 divergence(s)",
            },
        ],
        "divergences": [
            {
                "code": "REPLAY_DIVERGENCE",
                "iteration": 0,
                "field": "claims",
                "recorded": [{"v": 1.5, "a": "x"}],
                "replayed": [],
            },
            {
                "code": "RESULT_MISMATCH",
                "iteration": None,
                "field": "final_answer",
                "recorded": "5",
                "replayed": None,
            },
        ],
        "unreconstructable": [
            {
                "sequence_index": 3,
                "event_type": "AgentOutput",
                "step": "iteration 0 math_agent",
                "missing": ["response"],
                "reason": "capture mode prompts_only stores the hash of response only",
            }
        ],
        "reproduced": False,
        "checks": [
            {
                "sequence_index": 0,
                "subject": "event 0 InputReceived",
                "check": "diverged",
                "detail": "the re-run differs",
                "uri": "mace://acme/job/job-1/event/0",
            },
            {
                "sequence_index": 1,
                "subject": "event 1 GateDecision",
                "check": "taken_as_recorded",
                "detail": "not | re-evaluated",
                "uri": "mace://acme/job/job-1/event/1",
            },
            {
                "sequence_index": None,
                "subject": "final answer",
                "check": "diverged",
                "detail": "re-computed: differs",
                "uri": None,
            },
        ],
        "check_counts": {
            "reexecuted": 0,
            "hash_compared": 0,
            "taken_as_recorded": 1,
            "missing": 0,
            "diverged": 2,
            "not_checked": 0,
        },
    }
    canonical_json(report)  # it is JSON through and through


def test_the_same_outcome_gives_the_same_bytes() -> None:
    first = replay_report(handmade_outcome(), ANA, 7, True, "acme")
    second = replay_report(handmade_outcome(), ANA, 7, True, "acme")
    assert canonical_json(first) == canonical_json(second)
    assert render_markdown(first).encode() == render_markdown(second).encode()


def test_the_markdown_is_rendered_from_the_json_alone() -> None:
    report = replay_report(handmade_outcome(), ANA, 7, True, "acme")
    through_json = json.loads(canonical_json(report))
    assert render_markdown(through_json) == render_markdown(report)


def test_the_markdown_shows_each_step_divergence_and_unreconstructable_step() -> None:
    outcome = handmade_outcome()
    markdown = render_markdown(replay_report(outcome, ANA, 7, True, "acme"))
    lines = markdown.splitlines()
    assert lines[0] == "# Replay report: job `job-1`, attempt 7"
    assert lines[2] == (
        "**Verdict: FAILED REPLAY_DIVERGENCE, NON-AUTHORITATIVE; of 3 facts: 0 re-executed and"
        " matched, 0 compared by hash, 1 taken as recorded (only the run vouches for it),"
        " 0 missing, 2 diverged**"
    )
    assert "- Report: `mace://acme/job/job-1/replay/7/report`" in lines
    assert [line for line in lines if line.startswith(("| [event", "| final"))] == [
        "| [event 0 InputReceived](mace://acme/job/job-1/event/0) | diverged"
        " | the re-run differs |",
        "| [event 1 GateDecision](mace://acme/job/job-1/event/1) | taken as recorded"
        " | not \\| re-evaluated |",
        "| final answer | diverged | re-computed: differs |",
    ]
    assert "- Result: **FAILED: REPLAY_DIVERGENCE** (**NON-AUTHORITATIVE**)" in lines
    assert "- Mode: `reexecute`, force-continue requested" in lines
    assert "- Actor: `ana` (admin, auditor)" in lines
    assert "- Capture mode: `prompts_only`" in lines
    assert "- Reason: forced replay found 2 divergence(s)" in lines
    for reason in outcome.non_authoritative:
        assert f"- Not authoritative: {reason}" in lines
    assert f"- router: `{'r' * 64}`" in lines
    assert "- selfrep: `None`" in lines
    assert [line for line in lines if line.startswith("| ") and line[2].isdigit()] == [
        "| 1 | 1 load reflective log | ok | job job-1 \\| sealed |",
        "| 2 | 7 reducers: selfrep | skipped | not materialised |",
        "| 3 | compare claims (iteration 0) | failed | REPLAY_DIVERGENCE: claims differ |",
        "| 4 | result | failed | forced replay found 2 divergence(s) |",
    ]
    for divergence in outcome.divergences:
        block = f"```json\n{canonical_json(divergence.as_json()).decode()}\n```"
        assert block in markdown
    assert (
        "```json\n"
        '{"code":"REPLAY_DIVERGENCE","field":"claims","iteration":0,'
        '"recorded":[{"a":"x","v":1.5}],"replayed":[]}\n```'
    ) in markdown
    assert "### REPLAY_DIVERGENCE: `claims` (iteration 0)" in lines
    assert "### RESULT_MISMATCH: `final_answer` (job)" in lines
    assert (
        "- iteration 0 math_agent (event 3): response not persisted:"
        " capture mode prompts_only stores the hash of response only"
    ) in lines
    assert "None." not in lines
    assert markdown.endswith("\n")


def test_a_clean_report_is_authoritative_and_says_none() -> None:
    job, _ = recorded_job("2 + 3")
    outcome = audit(FakeSource(job))
    report = replay_report(outcome, ANA, 1, False, DEFAULT_TENANT)
    assert report["ok"] is True
    assert report["authoritative"] is True
    assert report["error_code"] is None
    markdown = render_markdown(report)
    lines = markdown.splitlines()
    assert "- Result: **OK** (authoritative)" in lines
    assert "- Mode: `audit`" in lines
    assert "NON-AUTHORITATIVE" not in markdown
    assert not any(line.startswith("- Reason:") for line in lines)
    assert "None." in lines
    assert "None: every agent, model and tool output was persisted." in lines
    for number, step in enumerate(outcome.steps, 1):
        assert f"| {number} | {step.step} | {step.outcome} | {step.detail} |" in lines


def test_reports_of_real_replays_are_byte_identical() -> None:
    job, _ = recorded_job("2 + 3", tamper=tampered_trace, capture=CaptureMode.PROMPTS_ONLY)

    def rendered() -> tuple[bytes, bytes]:
        outcome = audit(FakeSource(job), force_continue=True, force_approved=True)
        report = replay_report(outcome, ANA, 2, True, DEFAULT_TENANT)
        return canonical_json(report), render_markdown(report).encode()

    first, second = rendered(), rendered()
    assert first == second
    report = json.loads(first[0])
    markdown = first[1].decode()
    assert report["authoritative"] is False
    assert "**NON-AUTHORITATIVE**" in markdown
    assert report["unreconstructable"]
    for missing in report["unreconstructable"]:
        assert f"- {missing['step']} (event {missing['sequence_index']}): " in markdown
    for divergence in report["divergences"]:
        assert f"```json\n{canonical_json(divergence).decode()}\n```" in markdown
    for step in report["steps"]:
        assert f"| {step['step']} | {step['outcome']} | " in markdown


def test_a_declared_mock_makes_a_reexecute_replay_non_authoritative() -> None:
    job, _ = recorded_job("2 + 3")
    same = AgentReply(
        text="2 + 3 = 5",
        claims=[{"expression": "2 + 3", "value": 5}],
        evidence=[{"kind": "computation", "agent": "math_agent"}],
    )
    outcome = audit(FakeSource(job), mode=ReplayMode.REEXECUTE, mocks={"math_agent": same})
    assert outcome.ok, outcome.steps[-1]
    assert step_names(outcome) == SUCCESS_STEPS
    assert not outcome.authoritative
    assert outcome.non_authoritative == ["math_agent answered by a declared mock in iteration 0"]


def test_a_mocked_replay_that_stops_on_a_divergence_is_still_non_authoritative() -> None:
    job, _ = recorded_job("2 + 3")
    other = AgentReply(text="2 + 3 = 6", claims=[], evidence=[])
    outcome = audit(FakeSource(job), mode=ReplayMode.REEXECUTE, mocks={"math_agent": other})
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert not outcome.authoritative


# A signed record the ingest checks never saw (written with the keys, or by an older ledger):
# replay checks the tool boundary and every kept content's hash again.

TOOL_ARGUMENTS: dict[str, JsonValue] = {"q": "capital of france"}


def tool_call(request_hash: str) -> ToolCall:
    # model_construct: the very check under test would refuse to build it.
    return ToolCall.model_construct(
        call_id="c1",
        tool="search",
        tool_schema_hash=hash_of({"tool": "search"}),
        arguments=TOOL_ARGUMENTS,
        request_hash=request_hash,
    )


def tool_result(call_id: str) -> ToolResult:
    return ToolResult(call_id=call_id, status="ok", result={"hits": ["paris"]})


def test_a_recorded_tool_call_whose_hash_is_not_its_arguments_diverges() -> None:
    wrong = "0" * 64
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, tool_call(wrong), tool_result("c1")])
    outcome = audit(FakeSource(job), mode=ReplayMode.PRODUCTION)
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert outcome.divergences == [
        Divergence(
            ErrorCode.REPLAY_DIVERGENCE,
            None,
            "event 4 ToolCall request_hash",
            wrong,
            hash_of(TOOL_ARGUMENTS),
        )
    ]
    assert outcome.steps[-1].step == "compare event 4 ToolCall request_hash (job)"


def test_a_recorded_tool_result_for_no_call_diverges_on_the_tool_boundary() -> None:
    right = hash_of(TOOL_ARGUMENTS)
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, tool_call(right), tool_result("c2")])
    outcome = audit(FakeSource(job))
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    (divergence,) = outcome.divergences
    assert (divergence.field, divergence.recorded) == ("tool_boundary", "event 5")
    assert divergence.replayed == "ToolResult answers call_id 'c2', which no earlier ToolCall made"


def test_a_recorded_tool_result_whose_content_contradicts_its_status_diverges() -> None:
    # Taken in before ingest refused such a result: the replay diverges on it instead.
    said_ok: dict[str, JsonValue] = {"status": "ok"}
    contradicted = ToolResult.model_construct(
        call_id="c1", status="error", result=said_ok, response_hash=hash_of(said_ok)
    )
    right = hash_of(TOOL_ARGUMENTS)
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, tool_call(right), contradicted])
    outcome = audit(FakeSource(job))
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert outcome.divergences == [
        Divergence(ErrorCode.REPLAY_DIVERGENCE, None, "event 5 ToolResult status", "error", "ok")
    ]


def test_a_recorded_second_model_call_under_one_id_diverges_on_the_tool_boundary() -> None:
    call = ModelCallEnvelope(
        call_id="m1",
        model_id="gpt-x",
        model_version="2024-08-06",
        prompt_bundle_hash=hash_of("prompts"),
        temperature=0.0,
        seed=1,
        prompt="2 + 3?",
        response="5",
    )
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, call, call])
    outcome = audit(FakeSource(job))
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    (divergence,) = outcome.divergences
    assert (divergence.field, divergence.recorded, divergence.replayed) == (
        "tool_boundary",
        "event 5",
        "ModelCallEnvelope 'm1' is made a second time in this run",
    )


QUERY = "capital of france"


def retrieval(request_hash: str, **extra: Any) -> list[RunEvent]:
    # model_construct: ingest would refuse a request whose hash is not its query's.
    request = RetrievalRequest.model_construct(
        request_id="r1", query=QUERY, request_hash=request_hash, max_entries=10, **extra
    )
    return [request, RetrievalResponse(request_id="r1", hits=[])]


@pytest.mark.parametrize("served_at", [None, 1], ids=["from outside", "from the ledger"])
@pytest.mark.parametrize("broken", ["RetrievalRequest", "RetrievalResponse"])
def test_a_recorded_retrieval_whose_hash_is_not_its_content_diverges(
    served_at: int | None, broken: str
) -> None:
    wrong = "0" * 64
    extra = {} if served_at is None else {"memory_position": served_at}
    request, response = retrieval(hash_of(QUERY), **extra)
    if broken == "RetrievalRequest":
        request = request.model_copy(update={"request_hash": wrong})
        expected = ("event 4 RetrievalRequest request_hash", wrong, hash_of(QUERY))
    else:
        response = RetrievalResponse.model_construct(request_id="r1", hits=[], response_hash=wrong)
        expected = ("event 5 RetrievalResponse response_hash", wrong, hits_hash([]))
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, request, response])
    outcome = audit(FakeSource(job), mode=ReplayMode.PRODUCTION)
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert outcome.divergences[0] == Divergence(ErrorCode.REPLAY_DIVERGENCE, None, *expected)


def test_a_recorded_second_response_to_one_retrieval_diverges_on_the_retrieval_boundary() -> None:
    request, answer = retrieval(hash_of(QUERY), memory_position=1)
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, request, answer, answer])
    outcome = audit(FakeSource(job), mode=ReplayMode.PRODUCTION)
    assert outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert outcome.divergences[0] == Divergence(
        ErrorCode.REPLAY_DIVERGENCE,
        None,
        "retrieval_boundary",
        "event 6",
        "RetrievalResponse answers request_id 'r1' a second time",
    )


def test_a_recorded_retrieval_from_outside_with_its_query_hash_is_taken_as_recorded() -> None:
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, *retrieval(hash_of(QUERY))])
    outcome = audit(FakeSource(job), mode=ReplayMode.PRODUCTION)
    assert outcome.ok, outcome.error_message
    row = {r.subject: r for r in outcome.checks}["event 4 RetrievalRequest"]
    assert (row.check, row.detail) == (
        Check.TAKEN_AS_RECORDED,
        "a retrieval from outside the ledger, not re-run: request_hash is the hash of its query",
    )


def test_a_redacted_query_leaves_its_request_hash_taken_as_recorded() -> None:
    redacted = RetrievalRequest.model_construct(
        request_id="r1", query="", request_hash=hash_of(QUERY), max_entries=10
    )
    empty = RetrievalResponse(request_id="r1", hits=[])
    job, _ = recorded_job("2 + 3", tamper=lambda e: [*e, redacted, empty])
    outcome = audit(FakeSource(job), mode=ReplayMode.PRODUCTION)
    assert outcome.ok, outcome.error_message
    row = {r.subject: r for r in outcome.checks}["event 4 RetrievalRequest"]
    assert (row.check, row.detail) == (
        Check.TAKEN_AS_RECORDED,
        "a retrieval from outside the ledger, not re-run: its query is not kept (redacted),"
        " request_hash taken as recorded",
    )


# Provenance: a job recorded under rules this ledger does not implement is refused, not diverged.


def test_a_job_recorded_under_another_serializer_is_refused_as_unsupported_rules() -> None:
    job, _ = recorded_job("2 + 3")
    assert job.provenance is not None
    job.provenance = {**job.provenance, "serializer": "json.dumps/sort_keys"}
    outcome = audit(FakeSource(job))
    assert outcome.error_code is ErrorCode.UNSUPPORTED_RULES
    assert outcome.error_message == (
        "job job-1 was recorded under serializer 'json.dumps/sort_keys' (this ledger writes"
        " 'mace-canonical-json/1'), which this ledger does not implement"
    )
    assert [(s.step, s.outcome) for s in outcome.steps] == [("1 load reflective log", "failed")]
    assert {row.check.value for row in outcome.checks} == {"not_checked"}


@pytest.mark.parametrize(
    ("where", "change", "named"),
    [
        ("numeric", {"precision": 6}, "numeric rules"),
        (
            "id_generators",
            {"event_id": {"function": "uuid4()"}},
            "id generator event_id: 'uuid4()'",
        ),
    ],
)
def test_a_job_recorded_under_other_numeric_rules_or_id_generators_is_refused(
    where: str, change: dict[str, Any], named: str
) -> None:
    job, _ = recorded_job("2 + 3")
    assert job.provenance is not None
    job.provenance = {**job.provenance, where: {**job.provenance[where], **change}}
    outcome = audit(FakeSource(job))
    assert outcome.error_code is ErrorCode.UNSUPPORTED_RULES
    assert outcome.error_message is not None
    assert outcome.error_message.startswith(f"job job-1 was recorded under {named}")


def test_a_job_from_before_rules_were_recorded_replays_and_says_so() -> None:
    job, _ = recorded_job("2 + 3")
    job.provenance = None  # what a version 2 JobStarted is upcast to
    outcome = audit(FakeSource(job))
    assert outcome.ok
    assert outcome.steps[0].detail.endswith(
        "rules not recorded (a job from before they were): taken as mace-canonical-json/1"
    )
