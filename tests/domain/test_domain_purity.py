"""The domain's deciding code runs without the wall clock or unseeded randomness.

Every command of every aggregate, and the event a live run would store, is exercised inside
`forbid_nondeterminism`; timestamps must come from the deterministic clock alone.
"""

from __future__ import annotations

from support.forbidden_calls import forbid_nondeterminism

from domain.context_assembly import ContextCaller, ContextRequest, assemble_context
from domain.determinism import DeterministicClock
from domain.governance import Actor, Governance, HaltCause
from domain.job import Job, JobSealWitness
from domain.memories import MemoryLog
from domain.policy import parse_bundle
from domain.policy_book import PolicyBook
from domain.receipt import BODY_KEYS, Receipt, receipt_id_for
from domain.replay_record import ReplayRecord
from domain.snapshot import Snapshot


def test_aggregate_commands_touch_no_clock_or_randomness() -> None:
    with forbid_nondeterminism():
        snapshot = Snapshot.declare("router", {"rules": [{"id": "R1", "weight": 0.5}]})
        job = Job.start("job-1", "s1", "2 + 2", {"router": snapshot.snapshot_id})
        job.record("ROUTER_DECISION", {"agent": "math_agent"})
        job.seal(job.version, "0" * 64)
        witness = JobSealWitness(job_id="job-1", event_count=2, mac_digest="0" * 64)
        governance = Governance.open("job:job-1")
        ada, ops = Actor.of("ada", ["council"]), Actor.of("ops", ["admin"])
        governance.request_force_continue("diverged at iteration 0", ops, "t")
        governance.cast_vote("force_continue", "approve", ada, "2026-11-22T00:00Z")
        attempt = governance.request_replay("audit", True, ops, "t")
        governance.record_replay_result(attempt, True, None, True, 0, "0" * 64, "t")
        halts = Governance.open(f"tenant-snapshot:acme|{snapshot.snapshot_id}")
        halts.halt(snapshot.snapshot_id, HaltCause.INTEGRITY_FAILURE, "MAC", ops, "t")
        halts.clear_halt(snapshot.snapshot_id, ada, "t")
        record = ReplayRecord.recorded(
            "job-1", attempt, "audit", [("1 load reflective log", "ok", "job")], {"ok": True}, "#"
        )
        memories = MemoryLog(tenant="acme")
        memories.remember_fact("user/customer/a/plan", "gold", ["pii"], {"actor": "w"})
        memories.remember_episode("a asked about the plan", [], {"actor": "w"})
        memories.forget(memories.latest.memory_id, "asked to forget", {"actor": "w"})
        bundle = parse_bundle(
            "version: 1\nrules:\n- {id: r, when: {memory_label: pii}, action: redact}\n"
        )
        context = assemble_context(
            memories.live(), ContextRequest("plan"), ContextCaller("bot", ("operator",)), bundle
        )
        assert context.filters_applied == [
            {"rule_id": "r", "memory_id": memories.latest.memory_id, "action": "redact"}
        ]
        body = dict.fromkeys(BODY_KEYS) | {"receipt_id": receipt_id_for("acme", "0" * 64, 0)}
        receipt = Receipt.emit(body, None)
        book = PolicyBook(scope="global")
        book.set_bundle("version: 1\nrules: []\n", "ada", "t")
    for aggregate in (snapshot, job, witness, governance, halts, receipt, record, memories, book):
        clock = DeterministicClock(aggregate.clock_seed)
        stamps = [e.timestamp for e in aggregate.collect_events()]
        assert stamps == [clock.at(v) for v in range(1, len(stamps) + 1)]
