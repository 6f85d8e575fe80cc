"""A small job recorded piece by piece, for storage and tampering tests, and the job listing."""

from __future__ import annotations

from domain.job import DEFAULT_TENANT, Job
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from projections.job_search import JobQuery

ROUTER = {"rules": [{"id": "R1", "pattern": "x", "weight": 0.1 + 0.2}]}


def record_sample_job(ledger: Ledger, job_id: str = "job-1", seed: str = "s1") -> Job:
    snapshot, _ = ledger.snapshots.put(Snapshot.declare("router", ROUTER))
    ledger.jobs.start(job_id, seed, "2 + 2", {"router": snapshot.snapshot_id})
    ledger.jobs.record_events(
        job_id,
        [
            ("ROUTER_DECISION", {"agent": "math_agent", "why": "matched_R1_math"}),
            ("FINAL_OUTPUT", {"text": "4", "score": 0.1 + 0.2, "parts": (1, 2)}),
        ],
    )
    return ledger.jobs.seal(job_id)


def job_ids(ledger: Ledger, tenant: str = DEFAULT_TENANT) -> list[str]:
    """The tenant's jobs in the order the store recorded them: the job index, as `mace jobs`
    lists it."""
    return [row["job_id"] for row in ledger.read_models.jobs(JobQuery(tenant))["jobs"]]
