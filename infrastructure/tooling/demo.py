"""``mace demo``: what the ledger does, shown on real jobs in a few seconds.

Records one Stage-0 job per router rule plus a memory write and a read of it, replays each in
production mode, then, on a scratch copy of the store (so the user's ledger is never touched),
shows the two ways a record can be wrong: a run whose recorded routing disagrees with its router
snapshot (``REPLAY_DIVERGENCE`` with its diff) and a stored event with one byte flipped
(``INTEGRITY_FAILURE``). Last, an agent of a framework we did not write (`demo_agent`: the OpenAI
Agents SDK, traced by OpenInference) recorded from its OTLP export, verified, replayed, and its
code re-executed against the recording, unchanged and after a change; without the ``agents``
extra, one line says how to add that part. The demo acts as ``demo`` holding admin and auditor,
and says so.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from domain.canonical import canonical_json
from domain.errors import ErrorCode
from domain.events import JobCompleted, RouterDecision, RunCompleted, RunStarted, decode_recorded
from domain.governance import Actor
from domain.job import DEFAULT_TENANT, CaptureMode, Job
from domain.replay_access import ReplayMode
from domain.snapshot import SnapshotKind
from infrastructure.application.ledger import Ledger
from infrastructure.application.replay_harness import reexecute
from infrastructure.application.settings import SQLiteStore
from projections.replay_report import verdict

SEED: Final = "demo"
JOBS: Final = (
    ("R1 math", "2 + 3"),
    ("R2 profile (SEM write)", "my favorite color is blue"),
    ("R2 profile (SEM read)", "what is my favorite color"),
    ("R3 knowledge", "what is the capital of France"),
    ("R4 fallback", "hello there"),
)
DEMO_ACTOR: Final = Actor.of("demo", ["admin", "auditor"])
AGENT_MODULE: Final = "infrastructure.tooling.demo_agent"
AGENTS_EXTRA: Final = "pip install '.[agents]' in the ledger's repository"

Say = Callable[[str], None]


def run_demo(ledger: Ledger, say: Say) -> bool:
    """Run the demo on the ledger (SQLite); True when everything came out as it should."""
    assert ledger.status.sqlite is not None
    where = ledger.status.where
    say(f"MACE Ledger demo: store {where}, acting as demo [admin, auditor]")
    say("")
    say("1. Record Stage-0 jobs, one per router rule, and a memory write and its read:")
    job_ids = []
    for label, text in JOBS:
        # full_io: the demo replays in production mode, which needs every response kept.
        log = ledger.jobs.run(text, SEED, capture_mode=CaptureMode.FULL_IO)
        assert log.completion is not None
        job_ids.append(log.job_id)
        say(f"   {label:<24} {text!r:<34} -> {log.completion.final_output}")
        say(f"   {'':<24} job {log.job_id}")
    say("")
    say("2. Replay each job in production mode, bit for bit:")
    all_ok = True
    for job_id in job_ids:
        result = ledger.replays.run(job_id, ReplayMode.PRODUCTION, DEMO_ACTOR)
        say(f"   {job_id[:16]}  {verdict(result.report)}")
        all_ok = all_ok and result.outcome.ok
    say("")
    with tempfile.TemporaryDirectory(prefix="mace-demo-") as scratch:
        copy = _scratch_copy(ledger, Path(scratch))
        say(f"3. On a scratch copy of the store ({copy.status.where}):")
        with copy:
            all_ok = _show_divergence(copy, job_ids[0], say) and all_ok
            all_ok = _show_flipped_byte(copy, job_ids[0], say) and all_ok
        say("   (the scratch copy is deleted; your ledger is untouched)")
    say("")
    agent_ok, agent_job = _show_framework_agent(ledger, say)
    all_ok = agent_ok and all_ok
    say("")
    say("Next:")
    say("   mace jobs")
    say(f"   mace events {job_ids[0]}")
    say("   export MACE_ACTOR=you MACE_ROLES=auditor   # who is acting, for replays")
    say(f"   mace replay {job_ids[2]} --report-dir reports")
    say(f"   mace governance log {job_ids[2]}")
    if agent_job is not None:
        say(f"   mace reexecute {agent_job} --agent {AGENT_MODULE}:run_as_recorded")
    say("   mace verify --all")
    say("   mace rebuild")
    return all_ok


def _scratch_copy(ledger: Ledger, directory: Path) -> Ledger:
    """A consistent copy of the SQLite store, opened with the same keys."""
    location = ledger.status.sqlite
    assert location is not None
    target = directory / "mace.db"
    source = sqlite3.connect(location.path)
    destination = sqlite3.connect(target)
    try:
        source.backup(destination)
    finally:
        destination.close()
        source.close()
    # Thrown away after the demo tampers with it: nothing to checkpoint (and the tampered event
    # would make the checkpoint refuse, with a warning that is no part of the demo).
    return ledger.copy_at(SQLiteStore(target))


def _show_divergence(ledger: Ledger, job_id: str, say: Say) -> bool:
    """Record the job again as an outside run whose routing says R4, and replay it."""
    stream = ledger.jobs.stream(job_id)
    started = stream[0]["payload"]
    events = []
    for entry in stream[1:]:
        if entry["event_type"] in {JobCompleted.EVENT_TYPE, "JobSealed"}:
            continue
        event = decode_recorded(entry["event_type"], entry["payload"])
        if isinstance(event, RouterDecision):
            event = event.model_copy(
                update={"rule_id": "R4", "agent": "generic_agent", "why": "matched_R4_fallback"}
            )
        events.append(event)
    run = RunStarted(
        job_id=f"{job_id[:16]}-misrouted",
        seed=started["job_seed"],
        input=started["job_input"],
        snapshot_ids={SnapshotKind(k): v for k, v in started["snapshot_ids"].items()},
        capture_mode=CaptureMode(started["capture_mode"]),
    )
    trace = events[-1]
    events[-1] = trace.model_copy(
        update={
            "router_decision": {
                "rule_id": "R4",
                "agent": "generic_agent",
                "why": "matched_R4_fallback",
                "fallback": None,
            }
        }
    )
    final = ledger.jobs.reflective_log(job_id).as_json()["final_answer"]
    ledger.runs.record(run, events, RunCompleted(final_output=final))
    result = ledger.replays.run(run.job_id or "", ReplayMode.AUDIT, DEMO_ACTOR)
    say("   a) a run recorded from outside whose routing disagrees with its router snapshot:")
    say(f"      mace replay {run.job_id} -> {result.report['error_code']}")
    for divergence in result.report["divergences"]:
        _say_divergence(divergence, say)
    return result.outcome.error_code is ErrorCode.REPLAY_DIVERGENCE


def _show_flipped_byte(ledger: Ledger, job_id: str, say: Say) -> bool:
    """Flip one byte of the job's second stored event, straight in the database file."""
    location = ledger.status.sqlite
    assert location is not None
    stream = Job.id_for(job_id).hex  # how eventsourcing stores ids in SQLite
    with sqlite3.connect(location.path) as db:
        (state,) = db.execute(
            "SELECT state FROM stored_events WHERE originator_id = ? AND originator_version = 2",
            (stream,),
        ).fetchone()
        flipped = bytearray(state)
        flipped[-3] ^= 0x01
        db.execute(
            "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = 2",
            (bytes(flipped), stream),
        )
    result = ledger.replays.run(job_id, ReplayMode.PRODUCTION, DEMO_ACTOR)
    say("   b) one byte flipped in a stored event of the first job:")
    say(f"      mace replay {job_id[:16]}... -> {result.report['error_message']}")
    say(f"      {result.report['error_code']}: the replay fails closed")
    return result.outcome.error_code is ErrorCode.INTEGRITY_FAILURE


def _show_framework_agent(ledger: Ledger, say: Say) -> tuple[bool, str | None]:
    """Record the Agents SDK agent's run from its OTLP export, verify it, replay it, re-execute
    its code unchanged and changed; whether all came out as it should, and its job id (None
    without the ``agents`` extra, which the demo then names)."""
    try:
        from infrastructure.tooling import demo_agent  # noqa: PLC0415
    except ImportError as missing:  # the agents extra is not installed: the rest still shows
        say(
            "4. An OpenAI Agents SDK agent recorded through OTLP and re-executed: needs the"
            f" agents extra ({missing.name} is not installed): {AGENTS_EXTRA}"
        )
        return True, None
    say("4. An OpenAI Agents SDK agent (two function tools, a scripted model: no network), traced")
    say("   by OpenInference's instrumentation, its spans exported as OTLP and taken in by the")
    say("   intake POST /v1/traces hands each export to (here in process, no quiet period):")
    log = demo_agent.record_through_otlp(ledger, DEFAULT_TENANT).log
    assert log is not None and log.completion is not None
    job_id = log.job_id
    say(f"   {demo_agent.QUESTION!r} -> {log.completion.final_output!r}")
    say(f"   job {job_id}")
    for missing_artifact in log.completion.missing_artifacts:
        say(
            f"   not replayable in production: event {missing_artifact.sequence_index} lacks"
            f" {', '.join(missing_artifact.missing)} (the agent left the provider's default)"
        )
    checked = ledger.jobs.verify(job_id)
    say(f"   mace verify: ok, {checked.events} events, sealed: {checked.sealed}")
    audit = ledger.replays.run(job_id, ReplayMode.AUDIT, DEMO_ACTOR)
    say(f"   mace replay (audit): {verdict(audit.report)}")
    taken = [r["subject"] for r in audit.report["checks"] if r["check"] == "taken_as_recorded"]
    say(f"      taken as recorded: {', '.join(taken)}")
    say("   Its code re-executed against the recording (answers from the recording, no model):")
    unchanged = reexecute(
        ledger.recordings, job_id, demo_agent.run_as_recorded, DEMO_ACTOR, tenant=DEFAULT_TENANT
    )
    say(f"   a) unchanged: mace reexecute {job_id[:16]}... --agent {AGENT_MODULE}:run_as_recorded")
    say(f"      -> {verdict(unchanged.report)}")
    changed = reexecute(
        ledger.recordings, job_id, demo_agent.run_changed, DEMO_ACTOR, tenant=DEFAULT_TENANT
    )
    say("   b) changed, get_weather now takes units (default metric):")
    say(f"      mace reexecute {job_id[:16]}... --agent {AGENT_MODULE}:run_changed")
    say(f"      -> {verdict(changed.report)}")
    for divergence in changed.report["divergences"]:
        _say_divergence(divergence, say)
    matched = unchanged.outcome.ok and unchanged.outcome.authoritative
    diverged = [(d.iteration, d.field) for d in changed.outcome.divergences] == [
        (1, "tool_call.arguments")
    ]
    return matched and diverged, job_id


def _say_divergence(divergence: dict[str, Any], say: Say) -> None:
    """A report's divergence: where, and both values in canonical JSON."""
    say(f"      iteration {divergence['iteration']}, field {divergence['field']}:")
    say(f"        recorded: {canonical_json(divergence['recorded']).decode()}")
    say(f"        replayed: {canonical_json(divergence['replayed']).decode()}")
