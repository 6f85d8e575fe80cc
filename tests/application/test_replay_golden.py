"""Replay golden tests: seed 000 sections 6-11 and seed 004 section 5, on SQLite and PostgreSQL.

REPLAY-01 to REPLAY-07 are seed 000 section 11's golden tests, one test (or a few) each; every
replay failure is asserted by its exact error code string and message, and every divergence by
the exact canonical bytes of its diff. Then one test per seed 004 section 5 equality field, the
replay caps (REPLAY_TIMEOUT), RESULT_MISMATCH, memory as the job saw it, the governance record
of every attempt and the rule that a replay never changes the job it replays.

Recorded runs that differ from what the Stage-0 runtime would do are built from a real job:
its stream is decoded back into Run Events, changed where a test says, and recorded under a new
job id through `RunService.record` (what ``mace ingest`` does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from support.ledger_fixtures import RawTable, store_of
from support.replay_steps import event_steps
from support.sample_job import job_ids

from domain.canonical import canonical_json, digest
from domain.errors import ErrorCode, NotFoundError
from domain.events import (
    EQUALITY_FIELDS,
    InputReceived,
    IterationTrace,
    JobCompleted,
    RouterDecision,
    RunCompleted,
    RunEvent,
    RunStarted,
    decode_recorded,
    hash_of,
)
from domain.evidence_uri import report_uri
from domain.governance import AccessDenied, Actor, GovernanceError, Motion, Vote
from domain.job import DEFAULT_TENANT, CaptureMode
from domain.replay_access import ReplayMode
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.agents import AgentReply
from domain.stage0.replies import F3_NO_AGENT
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import ReplayResult
from projections.replay import Divergence, StepLog

ANA = Actor.of("ana", ["admin", "auditor"])
"""Holds admin and auditor: may run production replays and request a force-continue."""
ANA_ON_COUNCIL = Actor.of("ana", ["council"])
CORA = Actor.of("cora", ["council"])
DAN = Actor.of("dan", ["council"])
OLI = Actor.of("oli", ["operator"])

SEED = "s1"
SUM = "2 + 3"
SUM_ANSWER = "2 + 3 = 5"

R1_DECISION: dict[str, Any] = {
    "agent": "math_agent",
    "fallback": None,
    "rule_id": "R1",
    "why": "matched_R1_math",
}
R4_DECISION: dict[str, Any] = {
    "agent": "generic_agent",
    "fallback": None,
    "rule_id": "R4",
    "why": "matched_R4_fallback",
}

# REPLAY-05's diff: "2 + 3" recorded as routed by R4, re-decided by the RouterConfig as R1.
ROUTER_DIFF = (
    b'{"code":"REPLAY_DIVERGENCE","field":"router_decision","iteration":0,'
    b'"recorded":{"agent":"generic_agent","fallback":null,"rule_id":"R4",'
    b'"why":"matched_R4_fallback"},'
    b'"replayed":{"agent":"math_agent","fallback":null,"rule_id":"R1","why":"matched_R1_math"}}'
)

# The math agent's prompt and reply for "2 + 3", as the live run records them.
SUM_PROMPT: dict[str, Any] = {"after_failure": False, "text": SUM, "user": "default"}
SUM_RESPONSE: dict[str, Any] = {
    "claims": [{"expression": SUM, "value": 5}],
    "evidence": [{"agent": "math_agent", "kind": "computation"}],
    "text": SUM_ANSWER,
}
SUM_REPLY = AgentReply(
    text=SUM_ANSWER,
    claims=[{"expression": SUM, "value": 5}],
    evidence=[{"kind": "computation", "agent": "math_agent"}],
)

# Production replay of a "2 + 3" job, step by step (seed 000 section 6, in its order).
PRODUCTION_STEPS = [
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
    "8 iteration 0: router_decision",
    "8 iteration 0: persisted agent outputs",
    *(f"8 iteration 0: {name}" for name in EQUALITY_FIELDS[1:]),
    *event_steps(0),
    "9 final answer",
    "result",
]
SEED_ORDER = {
    "1": 1,
    "2": 2,
    "2b": 2.5,
    "3": 3,
    "4": 4,
    "5": 5,
    "6": 6,
    "6b": 6.5,
    "7": 7,
    "8": 8,
    "9": 9,
}

FORCE_REQUIRED_TAIL = (
    "; continuing needs an admin's force-continue request and a council approval for this job"
    " in its governance record"
)


# --- helpers ------------------------------------------------------------------------------------


def replay(
    ledger: Ledger,
    job_id: str,
    mode: ReplayMode = ReplayMode.PRODUCTION,
    actor: Actor = ANA,
    *,
    force_continue: bool = False,
    mocks: dict[str, AgentReply] | None = None,
    elapsed: Callable[[], float] | None = None,
) -> ReplayResult:
    return ledger.replays.run(
        job_id, mode, actor, force_continue=force_continue, mocks=mocks, elapsed=elapsed
    )


def diff(divergence: Divergence) -> bytes:
    return canonical_json(divergence.as_json())


def assert_failed(result: ReplayResult, code: str, message: str) -> None:
    """The attempt failed with exactly this code string and message, in outcome and report."""
    outcome = result.outcome
    assert not outcome.ok
    assert outcome.error_code is not None
    assert outcome.error_code.value == code
    assert outcome.error_message == message
    assert result.report["ok"] is False
    assert result.report["error_code"] == code
    assert result.report["error_message"] == message
    assert f"- Result: **FAILED: {code}**" in result.markdown


def assert_reproduced(result: ReplayResult) -> None:
    """The replay matched the record in full and is authoritative."""
    outcome = result.outcome
    assert outcome.ok, outcome.steps[-1]
    assert outcome.error_code is None
    assert outcome.error_message is None
    assert outcome.divergences == []
    assert outcome.authoritative
    assert outcome.non_authoritative == []
    assert all(step.outcome == "ok" for step in outcome.steps), outcome.steps
    assert (
        StepLog("9 final answer", "ok", "the computed final answer equals the stored final_answer")
        in outcome.steps
    )
    assert outcome.steps[-1] == StepLog("result", "ok", "replay reproduced the job")
    assert result.report["ok"] is True
    assert result.report["error_code"] is None
    assert result.report["authoritative"] is True
    assert result.report["divergences"] == []
    assert "- Result: **OK** (authoritative)" in result.markdown


def replay_log(ledger: Ledger, job_id: str) -> list[dict[str, Any]]:
    """The job scope's REPLAY_REQUEST and REPLAY_RESULT entries, in order."""
    return [
        entry
        for entry in ledger.governance.log(job_id)
        if entry["scope"] == f"job:{job_id}"
        and entry["event"] in {"REPLAY_REQUEST", "REPLAY_RESULT"}
    ]


def subset(entry: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: entry[key] for key in keys}


def run_of(ledger: Ledger, job_id: str) -> tuple[dict[str, Any], list[RunEvent]]:
    """A recorded job as an emitter sent it: the Started payload and its events."""
    stream = ledger.jobs.stream(job_id)
    assert stream[0]["event_type"] == "JobStarted"
    events = [
        decode_recorded(entry["event_type"], entry["payload"])
        for entry in stream
        if entry["sequence_index"] is not None and entry["event_type"] != JobCompleted.EVENT_TYPE
    ]
    return stream[0]["payload"], events


def record_variant(
    ledger: Ledger,
    base_job_id: str,
    job_id: str,
    change: Callable[[RunEvent], RunEvent] = lambda event: event,
    *,
    final_output: Any = SUM_ANSWER,
    extra: Sequence[RunEvent] = (),
    snapshot_ids: dict[str, str] | None = None,
) -> str:
    """Record the base job's run again under ``job_id``, each event passed through ``change``."""
    started, events = run_of(ledger, base_job_id)
    ids: dict[str, str] = dict(started["snapshot_ids"])
    ids.update(snapshot_ids or {})
    log = ledger.runs.record(
        RunStarted(
            job_id=job_id,
            seed=started["job_seed"],
            input=started["job_input"],
            snapshot_ids={SnapshotKind(kind): sid for kind, sid in ids.items()},
            capture_mode=CaptureMode(started["capture_mode"]),
        ),
        [*(change(event) for event in events), *extra],
        RunCompleted(final_output=final_output),
    )
    return log.job_id


def change_trace(**fields: Any) -> Callable[[RunEvent], RunEvent]:
    """Change only the IterationTrace: the facts it summarises stay as the runtime made them."""

    def change(event: RunEvent) -> RunEvent:
        return event.model_copy(update=fields) if isinstance(event, IterationTrace) else event

    return change


def route_as(decision: dict[str, Any]) -> Callable[[RunEvent], RunEvent]:
    """Change the RouterDecision event and the trace's router_decision to ``decision``."""

    def change(event: RunEvent) -> RunEvent:
        if isinstance(event, RouterDecision):
            return event.model_copy(update=decision)
        if isinstance(event, IterationTrace):
            return event.model_copy(update={"router_decision": decision})
        return event

    return change


def snapshot_id_of(ledger: Ledger, job_id: str, kind: SnapshotKind) -> str:
    snapshot_id = ledger.jobs.reflective_log(job_id).snapshot_ids[f"{kind.value}_snapshot_id"]
    assert snapshot_id is not None
    return snapshot_id


def recorded_trace(ledger: Ledger, job_id: str) -> dict[str, Any]:
    traces = ledger.jobs.reflective_log(job_id).iteration_trace
    assert len(traces) == 1
    return traces[0]


# --- REPLAY-01: full replay equality ------------------------------------------------------------

ROUTED = [
    (SUM, "R1", "math_agent", SUM_ANSWER),
    ("my favorite color is blue", "R2", "profile_agent", "Noted: your favorite color is blue."),
    ("what is my favorite color", "R2", "profile_agent", "Your favorite color is blue."),
    ("what is the capital of France", "R3", "knowledge_agent", "Paris"),
    ("hello", "R4", "generic_agent", F3_NO_AGENT),
]


def test_REPLAY_01_production_replay_reproduces_one_job_per_rule(ledger: Ledger) -> None:
    ledger.sem.put("world/country/france/capital", "Paris")
    for text, rule, agent, answer in ROUTED:
        log = ledger.jobs.run(text, SEED, capture_mode=CaptureMode.FULL_IO)
        assert log.completion is not None and log.completion.replayable
        trace = log.iteration_trace[0]
        assert (trace["router_decision"]["rule_id"], trace["selected_agents"]) == (rule, [agent])
        assert log.completion.final_output == answer

        result = replay(ledger, log.job_id)

        assert_reproduced(result)
        assert [step.step for step in result.outcome.steps] == PRODUCTION_STEPS
        assert result.report["mode"] == "production"
        assert result.report["job_id"] == log.job_id
        assert result.report["unreconstructable"] == []
        assert ledger.jobs.reflective_log(log.job_id).as_json()["final_answer"] == answer
        entries = replay_log(ledger, log.job_id)
        assert [subset(e, ["event", "attempt"]) for e in entries] == [
            {"event": "REPLAY_REQUEST", "attempt": 1},
            {"event": "REPLAY_RESULT", "attempt": 1},
        ]
        assert subset(entries[1], ["ok", "error_code", "authoritative", "divergences"]) == {
            "ok": True,
            "error_code": None,
            "authoritative": True,
            "divergences": 0,
        }


def test_REPLAY_01_sem_write_then_read_replay_with_the_reads_recorded(ledger: Ledger) -> None:
    write = ledger.jobs.run(
        "my favorite color is blue", SEED, job_id="job-write", capture_mode=CaptureMode.FULL_IO
    )
    read = ledger.jobs.run(
        "what is my favorite color", SEED, job_id="job-read", capture_mode=CaptureMode.FULL_IO
    )
    written = recorded_trace(ledger, write.job_id)["sem_writes"]
    read_back = recorded_trace(ledger, read.job_id)["sem_reads"]
    assert [(w["key"], w["value"], w["status"]) for w in written] == [
        ("user/person/default/favorite_color", "blue", "written")
    ]
    assert [(r["key"], r["exists"], r["value"]) for r in read_back] == [
        ("user/person/default/favorite_color", True, "blue")
    ]
    assert read_back[0]["last_updated"] == written[0]["last_updated"]

    assert_reproduced(replay(ledger, write.job_id))
    assert_reproduced(replay(ledger, read.job_id))


def test_REPLAY_01_replaying_twice_gives_identical_reports(ledger: Ledger) -> None:
    ledger.jobs.run("my favorite color is blue", SEED, capture_mode=CaptureMode.FULL_IO)
    job_id = ledger.jobs.run(
        "what is my favorite color", SEED, capture_mode=CaptureMode.FULL_IO
    ).job_id

    first = replay(ledger, job_id)
    second = replay(ledger, job_id)

    assert (first.attempt, second.attempt) == (1, 2)
    assert (first.report["attempt"], second.report["attempt"]) == (1, 2)
    assert_reproduced(first)
    assert_reproduced(second)
    # Each report has its own address, which names its attempt; apart from those, they are equal.
    for result in (first, second):
        assert result.report["uri"] == report_uri(DEFAULT_TENANT, job_id, result.attempt)
    assert canonical_json({**first.report, "attempt": 0, "uri": None}) == canonical_json(
        {**second.report, "attempt": 0, "uri": None}
    )
    heading = f"# Replay report: job `{job_id}`, attempt "

    def without_attempt(result: ReplayResult) -> str:
        own = f"{heading}{result.attempt}\n", f"- Report: `{result.report['uri']}`\n"
        assert all(line in result.markdown for line in own)
        return result.markdown.replace(own[0], "").replace(own[1], "")

    assert without_attempt(first) == without_attempt(second)
    for result in (first, second):
        stored = ledger.replays.record(job_id, result.attempt)
        assert canonical_json(stored.report) == canonical_json(result.report)
        assert stored.markdown == result.markdown


# --- REPLAY-02: missing snapshot ----------------------------------------------------------------


@pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpointed", "never_checkpointed"])
@pytest.mark.parametrize("kind", list(SnapshotKind))
def test_REPLAY_02_deleted_snapshot_fails_missing_snapshot_and_halts(
    ledger: Ledger, raw_table: RawTable, kind: SnapshotKind, checkpointed: bool
) -> None:
    """As a user meets it (every CLI write checkpoints) and on a store never checkpointed:
    presence is checked before signatures, so the answer is MISSING_SNAPSHOT naming the snapshot
    and what proves it was deleted; the snapshot is halted as a flipped byte's is."""
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-02").job_id
    snapshot_id = snapshot_id_of(ledger, job_id, kind)
    stream = Snapshot.id_for(snapshot_id)
    if checkpointed:
        number = ledger.checkpoints.write().newest.checkpoint.number
        proof = (
            f"checkpoint {number} records its stream {stream} at version 1; the store holds"
            " none of it"
        )
    else:
        proof = "the job found it in the ledger when it completed"
    raw_table.execute("DELETE FROM {table} WHERE originator_id = %s", (raw_table.key(stream),))
    assert raw_table.rows(stream) == []

    result = replay(ledger, job_id)

    message = f"missing {kind.value} {snapshot_id} (deleted: {proof})"
    assert_failed(result, "MISSING_SNAPSHOT", message)
    assert result.outcome.steps[-1] == StepLog(
        "2 required snapshots", "failed", f"MISSING_SNAPSHOT: {message}"
    )
    assert result.outcome.divergences == []
    assert result.outcome.halt_snapshots == [snapshot_id]
    assert replay_log(ledger, job_id)[-1]["error_code"] == "MISSING_SNAPSHOT"
    record = ledger.governance.record(f"tenant-snapshot:{snapshot_id}")
    assert record is not None
    assert record.halted == {
        snapshot_id: "INTEGRITY_FAILURE: deleted from the ledger, found missing in replay job-02#1"
    }


def test_REPLAY_02_a_snapshot_never_stored_is_missing_and_halts_nothing(ledger: Ledger) -> None:
    """A run that declares a snapshot the ledger never held: missing, not deleted."""
    declared = "0" * 64
    record_variant(
        ledger,
        ledger.jobs.run(SUM, SEED).job_id,
        "job-02-never",
        snapshot_ids={SnapshotKind.ROUTER.value: declared},
    )

    result = replay(ledger, "job-02-never")

    assert_failed(result, "MISSING_SNAPSHOT", f"missing router {declared} (not in the ledger)")
    assert result.outcome.halt_snapshots == []


# --- REPLAY-03: signature mismatch --------------------------------------------------------------


def test_REPLAY_03_flipped_snapshot_byte_fails_integrity_and_halts_until_council_clears(
    ledger: Ledger, raw_table: RawTable
) -> None:
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-03", capture_mode=CaptureMode.FULL_IO).job_id
    other_job = ledger.jobs.run(
        "hello", SEED, job_id="job-03-other", capture_mode=CaptureMode.FULL_IO
    ).job_id
    snapshot_id = snapshot_id_of(ledger, job_id, SnapshotKind.ROUTER)
    assert snapshot_id_of(ledger, other_job, SnapshotKind.ROUTER) == snapshot_id
    stream = Snapshot.id_for(snapshot_id)
    original = raw_table.state(stream, 1)
    flipped = bytearray(original)
    flipped[-3] ^= 0x01
    raw_table.set_column(stream, 1, "state", bytes(flipped))

    tampered = replay(ledger, job_id)

    message = f"router snapshot {snapshot_id}: stream {stream} version 1: MAC mismatch"
    assert_failed(tampered, "INTEGRITY_FAILURE", message)
    assert tampered.outcome.steps[-1] == StepLog(
        "3 snapshot signatures", "failed", f"INTEGRITY_FAILURE: {message}"
    )
    assert tampered.outcome.halt_snapshots == [snapshot_id]
    scope = f"tenant-snapshot:{snapshot_id}"  # the replaying job's (default) tenant's halt
    halt_reason = "signature check failed in replay job-03#1"
    record = ledger.governance.record(scope)
    assert record is not None
    assert record.halted == {snapshot_id: f"INTEGRITY_FAILURE: {halt_reason}"}
    halts = [e for e in ledger.governance.log(job_id) if e["scope"] == scope]
    assert [e["event"] for e in halts] == ["GOVERNANCE_OPENED", "FORCE_HALT_REPLAY"]
    assert subset(halts[1], ["snapshot_id", "cause", "reason", "actor_id"]) == {
        "snapshot_id": snapshot_id,
        "cause": "INTEGRITY_FAILURE",
        "reason": halt_reason,
        "actor_id": "ana",
    }

    # The bytes are back and verify again, but the halt stays: for every job and mode.
    raw_table.set_column(stream, 1, "state", original)
    assert ledger.snapshots.get(snapshot_id).snapshot_id == snapshot_id
    halted = (
        f"router snapshot {snapshot_id} is halted (INTEGRITY_FAILURE: {halt_reason}) until the"
        " council appends FORCE_HALT_CLEAR"
    )
    for job, mode in [
        (job_id, ReplayMode.PRODUCTION),
        (job_id, ReplayMode.AUDIT),
        (other_job, ReplayMode.PRODUCTION),
    ]:
        result = replay(ledger, job, mode)
        assert_failed(result, "FORCE_HALT_REPLAY", halted)
        assert result.outcome.steps[-1] == StepLog(
            "2b force halts", "failed", f"FORCE_HALT_REPLAY: {halted}"
        )
        assert result.outcome.halt_snapshots == []

    with pytest.raises(AccessDenied) as denied:
        ledger.governance.clear_halt(snapshot_id, ANA, DEFAULT_TENANT)
    assert denied.value.code is ErrorCode.ACCESS_DENIED
    assert str(denied.value) == (
        "ACCESS_DENIED: only the council role may clear a halt; ana holds ['admin', 'auditor']"
    )
    assert_failed(replay(ledger, job_id), "FORCE_HALT_REPLAY", halted)

    ledger.governance.clear_halt(snapshot_id, CORA, DEFAULT_TENANT)

    record = ledger.governance.record(scope)
    assert record is not None and record.halted == {}
    events = [e for e in ledger.governance.log(job_id) if e["scope"] == scope]
    assert [e["event"] for e in events] == [
        "GOVERNANCE_OPENED",
        "FORCE_HALT_REPLAY",
        "FORCE_HALT_CLEAR",
    ]
    assert subset(events[2], ["snapshot_id", "actor_id"]) == {
        "snapshot_id": snapshot_id,
        "actor_id": "cora",
    }
    assert_reproduced(replay(ledger, job_id))
    assert_reproduced(replay(ledger, other_job))


# --- REPLAY-04: missing persisted agent output --------------------------------------------------

PROMPTS_ONLY_GAP: dict[str, Any] = {
    "sequence_index": 2,
    "event_type": "AgentOutput",
    "step": "iteration 0 agent math_agent",
    "missing": ["response"],
    "reason": "capture mode prompts_only stores the hash of response only",
}


def test_REPLAY_04_unpersisted_agent_output_fails_production_replay(ledger: Ledger) -> None:
    log = ledger.jobs.run(SUM, SEED, job_id="job-04", capture_mode=CaptureMode.PROMPTS_ONLY)
    assert log.completion is not None and not log.completion.replayable

    production = replay(ledger, log.job_id, ReplayMode.PRODUCTION)

    message = (
        "iteration 0 agent math_agent (event 2): response not persisted:"
        " capture mode prompts_only stores the hash of response only"
    )
    assert_failed(production, "MISSING_PERSISTED_AGENT_OUTPUT", message)
    assert production.outcome.steps[-1] == StepLog(
        "8 persisted agent outputs", "failed", f"MISSING_PERSISTED_AGENT_OUTPUT: {message}"
    )
    assert production.outcome.divergences == []
    assert production.report["capture_mode"] == "prompts_only"
    assert production.report["unreconstructable"] == [PROMPTS_ONLY_GAP]

    audit = replay(ledger, log.job_id, ReplayMode.AUDIT)

    assert_reproduced(audit)
    assert audit.report["unreconstructable"] == [PROMPTS_ONLY_GAP]
    assert [m.model_dump() for m in audit.outcome.unreconstructable] == [PROMPTS_ONLY_GAP]
    assert (
        StepLog(
            "6 persisted outputs",
            "ok",
            "0 of 1 agent, model and tool outputs persisted (capture mode prompts_only)",
        )
        in audit.outcome.steps
    )
    assert (
        "- iteration 0 agent math_agent (event 2): response not persisted:"
        " capture mode prompts_only stores the hash of response only\n"
    ) in audit.markdown


# --- REPLAY-05: divergence detection ------------------------------------------------------------


def test_REPLAY_05_wrong_router_decision_is_a_divergence_with_its_canonical_diff(
    ledger: Ledger,
) -> None:
    base = ledger.jobs.run(SUM, SEED, job_id="job-05-base").job_id
    job_id = record_variant(ledger, base, "job-05", route_as(R4_DECISION))
    assert recorded_trace(ledger, job_id)["router_decision"] == R4_DECISION
    assert recorded_trace(ledger, base)["router_decision"] == R1_DECISION

    result = replay(ledger, job_id)

    message = "iteration 0: router_decision differs from the record"
    assert_failed(result, "REPLAY_DIVERGENCE", message)
    assert [diff(d) for d in result.outcome.divergences] == [ROUTER_DIFF]
    assert [canonical_json(d) for d in result.report["divergences"]] == [ROUTER_DIFF]
    assert result.outcome.steps[-1] == StepLog(
        "compare router_decision (iteration 0)", "failed", f"REPLAY_DIVERGENCE: {message}"
    )
    assert result.outcome.authoritative
    assert f"```json\n{ROUTER_DIFF.decode()}\n```" in result.markdown
    stored = ledger.replays.record(job_id, result.attempt)
    assert [canonical_json(d) for d in (stored.report or {})["divergences"]] == [ROUTER_DIFF]
    assert subset(replay_log(ledger, job_id)[-1], ["ok", "error_code", "divergences"]) == {
        "ok": False,
        "error_code": "REPLAY_DIVERGENCE",
        "divergences": 1,
    }


# --- REPLAY-06: force-continue requires governance ----------------------------------------------

FORCED_DIFFS = [
    ROUTER_DIFF,
    b'{"code":"REPLAY_DIVERGENCE","field":"final_output","iteration":0,'
    b'"recorded":"wrong","replayed":"2 + 3 = 5"}',
    b'{"code":"REPLAY_DIVERGENCE","field":"events.RouterDecision","iteration":0,'
    b'"recorded":[{"agent":"generic_agent","fallback":null,"iteration":0,"rule_id":"R4",'
    b'"schema_version":1,"why":"matched_R4_fallback"}],'
    b'"replayed":[{"agent":"math_agent","fallback":null,"iteration":0,"rule_id":"R1",'
    b'"schema_version":1,"why":"matched_R1_math"}]}',
    b'{"code":"RESULT_MISMATCH","field":"final_answer","iteration":null,'
    b'"recorded":"wrong","replayed":"2 + 3 = 5"}',
]


def _record_four_divergences(ledger: Ledger, job_id: str) -> str:
    """A run recorded routed by R4 with the answer "wrong": four divergences from the replay (the
    trace's route and answer, the RouterDecision event, the final answer)."""
    base = ledger.jobs.run(
        SUM, SEED, job_id=f"{job_id}-base", capture_mode=CaptureMode.FULL_IO
    ).job_id

    def change(event: RunEvent) -> RunEvent:
        event = route_as(R4_DECISION)(event)
        return change_trace(final_output="wrong")(event)

    return record_variant(ledger, base, job_id, change, final_output="wrong")


def test_REPLAY_06_force_continue_needs_an_admin_request_and_another_councils_approval(
    ledger: Ledger,
) -> None:
    job_id = _record_four_divergences(ledger, "job-06")
    first = "iteration 0: router_decision differs from the record"
    required = first + FORCE_REQUIRED_TAIL

    plain = replay(ledger, job_id)
    assert_failed(plain, "REPLAY_DIVERGENCE", first)
    assert [diff(d) for d in plain.outcome.divergences] == [ROUTER_DIFF]

    unrequested = replay(ledger, job_id, force_continue=True)
    assert_failed(unrequested, "FORCE_CONTINUE_REQUIRED", required)
    assert [diff(d) for d in unrequested.outcome.divergences] == [ROUTER_DIFF]
    assert unrequested.outcome.steps[-1] == StepLog(
        "compare router_decision (iteration 0)", "failed", f"FORCE_CONTINUE_REQUIRED: {required}"
    )

    ledger.governance.request_force_continue(job_id, "incident 42 forensics", ANA)
    request_only = replay(ledger, job_id, force_continue=True)
    assert_failed(request_only, "FORCE_CONTINUE_REQUIRED", required)

    with pytest.raises(GovernanceError) as own:
        ledger.governance.vote(job_id, Motion.FORCE_CONTINUE, Vote.APPROVE, ANA_ON_COUNCIL)
    assert str(own.value) == (
        "ana requested this force-continue: the council approval must come from someone else"
    )
    assert_failed(replay(ledger, job_id, force_continue=True), "FORCE_CONTINUE_REQUIRED", required)

    ledger.governance.vote(job_id, Motion.FORCE_CONTINUE, Vote.APPROVE, CORA)
    forced = replay(ledger, job_id, force_continue=True)

    assert_failed(forced, "REPLAY_DIVERGENCE", "forced replay found 4 divergence(s)")
    assert [diff(d) for d in forced.outcome.divergences] == FORCED_DIFFS
    assert [canonical_json(d) for d in forced.report["divergences"]] == FORCED_DIFFS
    assert not forced.outcome.authoritative
    assert forced.outcome.non_authoritative == [
        "forced past divergences with a council-approved force-continue"
    ]
    assert forced.report["authoritative"] is False
    assert forced.report["force_continue"] is True
    assert "(**NON-AUTHORITATIVE**)" in forced.markdown
    steps = forced.outcome.steps
    assert [s for s in steps if s.outcome == "failed"] == [
        StepLog(
            "compare router_decision (iteration 0)",
            "failed",
            f"REPLAY_DIVERGENCE: {first} (forced: continuing)",
        ),
        StepLog(
            "compare final_output (iteration 0)",
            "failed",
            "REPLAY_DIVERGENCE: iteration 0: final_output differs from the record"
            " (forced: continuing)",
        ),
        StepLog(
            "compare events.RouterDecision (iteration 0)",
            "failed",
            "REPLAY_DIVERGENCE: iteration 0: events.RouterDecision differs from the record"
            " (forced: continuing)",
        ),
        StepLog(
            "compare final_answer (job)",
            "failed",
            "RESULT_MISMATCH: job: final_answer differs from the record (forced: continuing)",
        ),
        StepLog("result", "failed", "forced replay found 4 divergence(s)"),
    ]
    # The replay ran to the end: every other field of the iteration was compared.
    for name in EQUALITY_FIELDS:
        if name not in {"router_decision", "final_output"}:
            assert StepLog(f"8 iteration 0: {name}", "ok", "matches the record") in steps
    assert subset(replay_log(ledger, job_id)[-1], ["ok", "error_code", "authoritative"]) == {
        "ok": False,
        "error_code": "REPLAY_DIVERGENCE",
        "authoritative": False,
    }
    assert replay_log(ledger, job_id)[-1]["divergences"] == 4

    # Approval alone does not force a replay that did not ask to be forced.
    assert_failed(replay(ledger, job_id), "REPLAY_DIVERGENCE", first)

    # A later council rejection withdraws the approval.
    ledger.governance.vote(job_id, Motion.FORCE_CONTINUE, Vote.REJECT, DAN)
    assert_failed(replay(ledger, job_id, force_continue=True), "FORCE_CONTINUE_REQUIRED", required)


def test_REPLAY_06_council_approval_without_an_admin_request_does_not_force(
    ledger: Ledger,
) -> None:
    job_id = _record_four_divergences(ledger, "job-06b")
    ledger.governance.vote(job_id, Motion.FORCE_CONTINUE, Vote.APPROVE, CORA)

    result = replay(ledger, job_id, force_continue=True)

    required = "iteration 0: router_decision differs from the record" + FORCE_REQUIRED_TAIL
    assert_failed(result, "FORCE_CONTINUE_REQUIRED", required)
    with pytest.raises(AccessDenied) as denied:
        ledger.governance.request_force_continue(job_id, "no admin role", CORA)
    assert denied.value.code is ErrorCode.ACCESS_DENIED


# --- REPLAY-07: sandbox reexecute with declared mocks -------------------------------------------

MOCKED = "math_agent answered by a declared mock in iteration 0"
WRONG_REPLY = AgentReply(text="2 + 3 = 6")


def test_REPLAY_07_reexecute_with_a_matching_mock_is_ok_but_non_authoritative(
    ledger: Ledger,
) -> None:
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-07").job_id

    result = replay(ledger, job_id, ReplayMode.REEXECUTE, mocks={"math_agent": SUM_REPLY})

    outcome = result.outcome
    assert outcome.ok
    assert outcome.error_code is None
    assert outcome.divergences == []
    assert not outcome.authoritative
    assert outcome.non_authoritative == [MOCKED]
    assert result.report["mode"] == "reexecute"
    assert result.report["authoritative"] is False
    assert result.report["non_authoritative_reasons"] == [MOCKED]
    assert "**NON-AUTHORITATIVE**" in result.markdown
    assert "- Result: **OK** (**NON-AUTHORITATIVE**)\n" in result.markdown
    assert f"- Not authoritative: {MOCKED}\n" in result.markdown
    assert subset(replay_log(ledger, job_id)[-1], ["ok", "authoritative"]) == {
        "ok": True,
        "authoritative": False,
    }


def _expected_mock_diff(ledger: Ledger, job_id: str) -> bytes:
    recorded = recorded_trace(ledger, job_id)["agent_outputs"]
    assert recorded == [
        {
            "agent": "math_agent",
            "error": None,
            "prompt": SUM_PROMPT,
            "request_hash": hash_of(SUM_PROMPT),
            "response": SUM_RESPONSE,
            "response_hash": hash_of(SUM_RESPONSE),
            "status": "ok",
        }
    ]
    wrong_response = {"claims": [], "evidence": [], "text": "2 + 3 = 6"}
    replayed = [
        {**recorded[0], "response": wrong_response, "response_hash": hash_of(wrong_response)}
    ]
    return canonical_json(
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": 0,
            "field": "agent_outputs",
            "recorded": recorded,
            "replayed": replayed,
        }
    )


def test_REPLAY_07_reexecute_with_a_different_mock_diverges_on_agent_outputs(
    ledger: Ledger,
) -> None:
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-07", capture_mode=CaptureMode.FULL_IO).job_id

    result = replay(ledger, job_id, ReplayMode.REEXECUTE, mocks={"math_agent": WRONG_REPLY})

    message = "iteration 0: agent_outputs differs from the record"
    assert_failed(result, "REPLAY_DIVERGENCE", message)
    assert [diff(d) for d in result.outcome.divergences] == [_expected_mock_diff(ledger, job_id)]
    assert result.outcome.steps[-1] == StepLog(
        "compare agent_outputs (iteration 0)", "failed", f"REPLAY_DIVERGENCE: {message}"
    )


def test_REPLAY_07_reexecute_with_a_different_mock_is_non_authoritative(ledger: Ledger) -> None:
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-07").job_id

    result = replay(ledger, job_id, ReplayMode.REEXECUTE, mocks={"math_agent": WRONG_REPLY})

    assert result.outcome.error_code is ErrorCode.REPLAY_DIVERGENCE
    assert not result.outcome.authoritative
    assert MOCKED in result.outcome.non_authoritative
    assert result.report["authoritative"] is False
    assert "**NON-AUTHORITATIVE**" in result.markdown
    assert replay_log(ledger, job_id)[-1]["authoritative"] is False


@pytest.mark.parametrize("mode", [ReplayMode.AUDIT, ReplayMode.PRODUCTION])
def test_REPLAY_07_mocks_outside_reexecute_are_refused_before_anything_is_recorded(
    ledger: Ledger, mode: ReplayMode
) -> None:
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-07").job_id

    with pytest.raises(ValueError, match="declared mocks are for reexecute replays only"):
        replay(ledger, job_id, mode, mocks={"math_agent": SUM_REPLY})

    assert replay_log(ledger, job_id) == []


# --- Seed 004 section 5: every equality field ---------------------------------------------------

CHANGED: dict[str, Any] = {
    "router_decision": R4_DECISION,
    "selected_agents": ["generic_agent"],
    "agent_outputs": [],
    "sem_reads": [
        {"exists": False, "key": "user/person/default/color", "last_updated": None, "value": None}
    ],
    "sem_writes": [
        {
            "key": "user/person/default/color",
            "last_updated": None,
            "reason": None,
            "status": "written",
            "value": "blue",
        }
    ],
    "final_output": "2 + 3 = 6",
    "council_votes": [{"actor_id": "cora", "motion": "force_continue", "vote": "approve"}],
    "claims": [{"expression": SUM, "value": 6}],
    "evidence_items": [],
    "brainstate_before": {"digest": "0" * 64, "state": {}},
    "brainstate_after": {"digest": "f" * 64, "state": {}},
}


def test_every_equality_field_has_a_changed_value() -> None:
    assert len(EQUALITY_FIELDS) == 11
    assert set(CHANGED) == set(EQUALITY_FIELDS)


@pytest.mark.parametrize("field", EQUALITY_FIELDS)
def test_a_trace_differing_in_one_equality_field_diverges_on_exactly_that_field(
    ledger: Ledger, field: str
) -> None:
    base = ledger.jobs.run(SUM, SEED, job_id="job-base").job_id
    real = recorded_trace(ledger, base)
    assert canonical_json(real[field]) != canonical_json(CHANGED[field])
    job_id = record_variant(ledger, base, "job-field", change_trace(**{field: CHANGED[field]}))
    recorded = recorded_trace(ledger, job_id)
    assert {k: v for k, v in recorded.items() if k != field} == {
        k: v for k, v in real.items() if k != field
    }

    result = replay(ledger, job_id, ReplayMode.AUDIT)

    message = f"iteration 0: {field} differs from the record"
    assert_failed(result, "REPLAY_DIVERGENCE", message)
    expected = canonical_json(
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": 0,
            "field": field,
            "recorded": CHANGED[field],
            "replayed": real[field],
        }
    )
    assert [diff(d) for d in result.outcome.divergences] == [expected]
    divergence = result.outcome.divergences[0]
    assert (divergence.iteration, divergence.field) == (0, field)
    assert canonical_json(divergence.recorded) == canonical_json(CHANGED[field])
    assert canonical_json(divergence.replayed) == canonical_json(real[field])
    assert [canonical_json(d) for d in result.report["divergences"]] == [expected]
    # Every field before it matched; the replay stopped at it.
    earlier = EQUALITY_FIELDS[: EQUALITY_FIELDS.index(field)]
    assert [s.step for s in result.outcome.steps if s.step.startswith("8 iteration 0: ")] == [
        f"8 iteration 0: {name}" for name in earlier
    ]
    assert result.outcome.steps[-1] == StepLog(
        f"compare {field} (iteration 0)", "failed", f"REPLAY_DIVERGENCE: {message}"
    )


# --- Caps, the final answer, memory -------------------------------------------------------------


def test_iteration_cap_of_the_governance_snapshot_stops_replay_with_timeout(
    ledger: Ledger,
) -> None:
    governance, _ = ledger.snapshots.put(
        Snapshot.declare("governance", {"replay_max_iterations": 1})
    )
    base = ledger.jobs.run(SUM, SEED, job_id="job-cap-base", capture_mode=CaptureMode.FULL_IO)
    _, events = run_of(ledger, base.job_id)
    percept = next(e for e in events if isinstance(e, InputReceived))
    trace = next(e for e in events if isinstance(e, IterationTrace))
    second_iteration = [
        percept.model_copy(update={"iteration": 1}),
        trace.model_copy(update={"iteration": 1}),
    ]
    job_id = record_variant(
        ledger,
        base.job_id,
        "job-cap",
        extra=second_iteration,
        snapshot_ids={"governance": governance.snapshot_id},
    )
    assert snapshot_id_of(ledger, job_id, SnapshotKind.GOVERNANCE) == governance.snapshot_id
    # Its own governance snapshot lets no replay reach its second iteration: not replayable.
    assert base.completion is not None and base.completion.replayable
    recorded = ledger.jobs.reflective_log(job_id).as_json()
    assert recorded["replayable"] is False
    assert recorded["missing_artifacts"] == [
        {
            "sequence_index": None,
            "event_type": "IterationTrace",
            "step": "replay iteration cap",
            "missing": ["iterations"],
            "reason": f"the job ran 2 iterations and its governance snapshot"
            f" {governance.snapshot_id} lets a replay run 1: no replay reaches iteration 1",
        }
    ]
    assert [t["router_decision"] for t in ledger.jobs.reflective_log(job_id).iteration_trace] == [
        R1_DECISION,
        R1_DECISION,
    ]

    result = replay(ledger, job_id, ReplayMode.AUDIT)

    message = "iteration cap 1 (governance snapshot) reached at iteration 1"
    assert_failed(result, "REPLAY_TIMEOUT", message)
    assert result.outcome.divergences == []
    assert result.outcome.steps[-1] == StepLog(
        "8 iteration 1: limits", "failed", f"REPLAY_TIMEOUT: {message}"
    )
    # Iteration 0 was inside the cap and was compared in full.
    for name in EQUALITY_FIELDS:
        assert StepLog(f"8 iteration 0: {name}", "ok", "matches the record") in result.outcome.steps
    assert replay_log(ledger, job_id)[-1]["error_code"] == "REPLAY_TIMEOUT"


def test_time_cap_of_the_governance_snapshot_stops_replay_with_timeout(ledger: Ledger) -> None:
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-time").job_id

    result = replay(ledger, job_id, ReplayMode.AUDIT, elapsed=lambda: 1e9)

    message = "replay time cap 60 s (governance snapshot) exceeded"
    assert_failed(result, "REPLAY_TIMEOUT", message)
    # Held to the cap from the moment its governance snapshot is verified, not only between
    # iterations (tests/application/test_replay_time_cap.py).
    assert result.outcome.steps[-1] == StepLog(
        "3 snapshot signatures: limits", "failed", f"REPLAY_TIMEOUT: {message}"
    )
    assert replay_log(ledger, job_id)[-1]["error_code"] == "REPLAY_TIMEOUT"
    # Within the cap the same job replays.
    assert_reproduced(replay(ledger, job_id, ReplayMode.AUDIT, elapsed=lambda: 60.0))


def test_a_recorded_final_answer_that_differs_is_a_result_mismatch(ledger: Ledger) -> None:
    base = ledger.jobs.run(SUM, SEED, job_id="job-rm-base", capture_mode=CaptureMode.FULL_IO).job_id
    job_id = record_variant(ledger, base, "job-rm", final_output="2 + 3 = 6")
    assert recorded_trace(ledger, job_id) == recorded_trace(ledger, base)

    result = replay(ledger, job_id)

    message = "job: final_answer differs from the record"
    assert_failed(result, "RESULT_MISMATCH", message)
    assert [diff(d) for d in result.outcome.divergences] == [
        b'{"code":"RESULT_MISMATCH","field":"final_answer","iteration":null,'
        b'"recorded":"2 + 3 = 6","replayed":"2 + 3 = 5"}'
    ]
    assert result.outcome.steps[-1] == StepLog(
        "compare final_answer (job)", "failed", f"RESULT_MISMATCH: {message}"
    )
    for name in EQUALITY_FIELDS:
        assert StepLog(f"8 iteration 0: {name}", "ok", "matches the record") in result.outcome.steps


def test_replay_reads_memory_as_the_job_saw_it_after_a_later_overwrite(ledger: Ledger) -> None:
    first_write = ledger.jobs.run(
        "my favorite color is blue", SEED, job_id="job-blue", capture_mode=CaptureMode.FULL_IO
    ).job_id
    read = ledger.jobs.run(
        "what is my favorite color", SEED, job_id="job-read-blue", capture_mode=CaptureMode.FULL_IO
    ).job_id
    overwrite = ledger.jobs.run(
        "my favorite color is green", SEED, job_id="job-green", capture_mode=CaptureMode.FULL_IO
    ).job_id
    key, now = ledger.sem.get("user/person/default/favorite_color")
    assert (now.exists, now.value) == (True, "green")
    seen = recorded_trace(ledger, read)["sem_reads"]
    assert [(r["key"], r["value"]) for r in seen] == [(key, "blue")]
    assert seen[0]["last_updated"] != now.last_updated

    for job_id in (read, first_write, overwrite):
        assert_reproduced(replay(ledger, job_id))
    assert ledger.sem.get(key)[1] == now


# --- The record of every attempt, and the job left as it was ------------------------------------


def test_an_unrecorded_replay_obeys_the_same_access_rules_and_records_nothing(
    ledger: Ledger,
) -> None:
    # What a bundle replay runs: the rules on the job's governance record as it stands.
    job_id = ledger.jobs.run(
        SUM, SEED, job_id="job-unrecorded", capture_mode=CaptureMode.FULL_IO
    ).job_id
    head = store_of(ledger).recorder.max_notification_id()

    refused = ledger.replays.replay_unrecorded(job_id, ReplayMode.PRODUCTION, OLI)
    denied = (
        "production replay needs an actor holding admin and auditor, or a council approval of"
        " production_replay for this job; oli holds ['operator']"
    )
    assert refused.steps == [StepLog("access", "failed", f"ACCESS_DENIED: {denied}")]
    assert refused.non_authoritative == ["the replay was refused before it ran"]
    assert ledger.replays.replay_unrecorded(job_id, ReplayMode.PRODUCTION, ANA).ok
    assert store_of(ledger).recorder.max_notification_id() == head

    ledger.governance.vote(job_id, Motion.PRODUCTION_REPLAY, Vote.APPROVE, CORA)
    approved = ledger.replays.replay_unrecorded(job_id, ReplayMode.PRODUCTION, OLI)
    assert approved.ok
    assert [step.step for step in approved.steps] == PRODUCTION_STEPS


def test_every_attempt_is_recorded_in_governance_and_its_replay_record(ledger: Ledger) -> None:
    job_id = ledger.jobs.run(SUM, SEED, job_id="job-log", capture_mode=CaptureMode.FULL_IO).job_id

    results = [
        replay(ledger, job_id, ReplayMode.PRODUCTION, ANA),
        replay(ledger, job_id, ReplayMode.PRODUCTION, OLI),
        replay(ledger, job_id, ReplayMode.REEXECUTE, OLI, mocks={"math_agent": SUM_REPLY}),
        replay(ledger, job_id, ReplayMode.AUDIT, OLI, elapsed=lambda: 1e9),
    ]
    ledger.governance.vote(job_id, Motion.PRODUCTION_REPLAY, Vote.APPROVE, CORA)
    results.append(replay(ledger, job_id, ReplayMode.PRODUCTION, OLI))

    denied = (
        "production replay needs an actor holding admin and auditor, or a council approval of"
        " production_replay for this job; oli holds ['operator']"
    )
    assert_failed(results[1], "ACCESS_DENIED", denied)
    assert results[1].outcome.steps == [StepLog("access", "failed", f"ACCESS_DENIED: {denied}")]
    assert_reproduced(results[4])

    entries = replay_log(ledger, job_id)
    expected: list[dict[str, Any]] = []
    for attempt, result in enumerate(results, 1):
        assert result.attempt == attempt
        expected += [
            {
                "event": "REPLAY_REQUEST",
                "attempt": attempt,
                "mode": result.report["mode"],
                "force_continue": False,
                "actor_id": result.report["actor"]["actor_id"],
                "roles": result.report["actor"]["roles"],
            },
            {
                "event": "REPLAY_RESULT",
                "attempt": attempt,
                "ok": result.outcome.ok,
                "error_code": result.report["error_code"],
                "authoritative": result.outcome.authoritative,
                "divergences": 0,
                "report_digest": digest(result.report),
            },
        ]
    assert [subset(entry, list(want)) for entry, want in zip(entries, expected, strict=True)] == (
        expected
    )
    assert [(e["ok"], e["error_code"]) for e in entries[1::2]] == [
        (True, None),
        (False, "ACCESS_DENIED"),
        (True, None),
        (False, "REPLAY_TIMEOUT"),
        (True, None),
    ]
    versions = [
        e["version"] for e in ledger.governance.log(job_id) if e["scope"] == f"job:{job_id}"
    ]
    assert versions == list(range(1, len(versions) + 1))

    # Each attempt's replay record holds its steps, in the order the replay took them.
    for result in results:
        stored = ledger.replays.record(job_id, result.attempt)
        assert stored.steps == [s.as_json() for s in result.outcome.steps]
        assert stored.steps == result.report["steps"]
        assert canonical_json(stored.report) == canonical_json(result.report)
        assert stored.markdown == result.markdown
    assert [s["step"] for s in ledger.replays.record(job_id, 1).steps] == PRODUCTION_STEPS
    for result in results:
        ranks = [
            SEED_ORDER.get(s.step.split(" ", 1)[0], 10 if s.step == "result" else -1)
            for s in result.outcome.steps
            if s.step != "access"
        ]
        assert -1 not in ranks, result.outcome.steps
        assert ranks == sorted(ranks)


def test_a_replay_never_changes_the_job(ledger: Ledger, raw_table: RawTable) -> None:
    job_id = ledger.jobs.run(
        "my favorite color is blue", SEED, job_id="job-same", capture_mode=CaptureMode.FULL_IO
    ).job_id
    diverging = _record_four_divergences(ledger, "job-same-diverging")
    jobs = [job_id, diverging]
    before = {j: canonical_json(ledger.jobs.stream(j)) for j in jobs}
    rows_before = {j: raw_table.rows(ledger.jobs.get(j).id) for j in jobs}
    registered = job_ids(ledger)
    key, memory = ledger.sem.get("user/person/default/favorite_color")

    assert_reproduced(replay(ledger, job_id, ReplayMode.PRODUCTION))
    assert_reproduced(replay(ledger, job_id, ReplayMode.AUDIT))
    replay(ledger, job_id, ReplayMode.REEXECUTE, mocks={"profile_agent": AgentReply("x")})
    replay(ledger, job_id, ReplayMode.AUDIT, elapsed=lambda: 1e9)
    replay(ledger, diverging)
    ledger.governance.request_force_continue(diverging, "forensics", ANA)
    ledger.governance.vote(diverging, Motion.FORCE_CONTINUE, Vote.APPROVE, CORA)
    forced = replay(ledger, diverging, force_continue=True)
    assert len(forced.outcome.divergences) == 4

    assert {j: canonical_json(ledger.jobs.stream(j)) for j in jobs} == before
    assert {j: raw_table.rows(ledger.jobs.get(j).id) for j in jobs} == rows_before
    assert job_ids(ledger) == registered
    assert ledger.sem.get(key)[1] == memory
    for j in jobs:
        assert ledger.jobs.verify(j, check_sequence=True).sealed


ACCESS_CASES = [
    (
        ReplayMode.AUDIT,
        CORA,
        False,
        "audit replay needs one of the roles ['admin', 'auditor', 'operator'];"
        " cora holds ['council']",
    ),
    (
        ReplayMode.PRODUCTION,
        CORA,
        True,
        "production replay needs an actor holding admin and auditor, or a council approval of"
        " production_replay for this job; cora holds ['council']",
    ),
    (
        ReplayMode.PRODUCTION,
        Actor.of("adam", ["admin"]),
        False,
        "production replay needs an actor holding admin and auditor, or a council approval of"
        " production_replay for this job; adam holds ['admin']",
    ),
    (
        ReplayMode.PRODUCTION,
        Actor.of("aud", ["auditor"]),
        False,
        "production replay needs an actor holding admin and auditor, or a council approval of"
        " production_replay for this job; aud holds ['auditor']",
    ),
    (ReplayMode.PRODUCTION, Actor.of("aud", ["auditor"]), True, None),
    (ReplayMode.REEXECUTE, OLI, False, None),
]


@pytest.mark.parametrize(("mode", "actor", "approved", "refusal"), ACCESS_CASES)
def test_replay_roles_are_enforced_and_a_refusal_is_recorded(
    ledger: Ledger, mode: ReplayMode, actor: Actor, approved: bool, refusal: str | None
) -> None:
    job_id = ledger.jobs.run(
        SUM, SEED, job_id="job-access", capture_mode=CaptureMode.FULL_IO
    ).job_id
    if approved:
        ledger.governance.vote(job_id, Motion.PRODUCTION_REPLAY, Vote.APPROVE, DAN)

    result = replay(ledger, job_id, mode, actor)

    if refusal is None:
        assert_reproduced(result)
    else:
        assert_failed(result, "ACCESS_DENIED", refusal)
        assert result.outcome.steps == [StepLog("access", "failed", f"ACCESS_DENIED: {refusal}")]
        assert not result.outcome.authoritative
    request, outcome = replay_log(ledger, job_id)
    assert subset(request, ["event", "attempt", "mode", "actor_id"]) == {
        "event": "REPLAY_REQUEST",
        "attempt": 1,
        "mode": mode.value,
        "actor_id": actor.actor_id,
    }
    assert subset(outcome, ["event", "attempt", "error_code"]) == {
        "event": "REPLAY_RESULT",
        "attempt": 1,
        "error_code": None if refusal is None else "ACCESS_DENIED",
    }


def test_unknown_or_open_jobs_are_refused_before_anything_is_recorded(ledger: Ledger) -> None:
    with pytest.raises(NotFoundError, match="no job job-none"):
        replay(ledger, "job-none")
    ids = ledger.snapshots.default_ids()
    ledger.jobs.start("job-open", SEED, SUM, ids, CaptureMode.FULL_IO)

    with pytest.raises(ValueError, match="job job-open is open: only completed, sealed jobs"):
        replay(ledger, "job-open")

    assert replay_log(ledger, "job-open") == []
    assert ledger.governance.log() == []
