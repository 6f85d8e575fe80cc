"""``mace import``: a verified bundle's job written into another store, byte for byte."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from eventsourcing.persistence import StoredEvent

from domain.errors import ConflictError
from infrastructure.application.ledger import Ledger
from infrastructure.bundles.format import Bundle, BundleError


@dataclass(frozen=True)
class ImportSummary:
    job_id: str
    tenant: str
    written: int
    streams_written: list[str]
    streams_present: list[str]
    governance_left: list[str]


IMPORTED_ROLES: Final = frozenset({"job", "seal_witness", "snapshot", "sem"})


def import_bundle(ledger: Ledger, bundle: Bundle) -> ImportSummary:
    """Write the bundle's job into ``ledger`` verbatim, in one transaction: its stream and
    witness (which must be new), its snapshots and SEM entries (skipped where the store holds the
    same bytes, extended where it holds an identical prefix, refused where it differs).
    Governance records stay behind: approvals, halts and replay results are decisions about the
    store they were made in."""
    if bundle.redacted:
        msg = (
            f"bundle {bundle.name} is redacted: its redacted records no longer verify by their"
            " MACs, so it can be replayed but not imported"
        )
        raise BundleError(msg)
    job_id, tenant = bundle.job_id, bundle.tenant

    def attempt() -> ImportSummary:
        if ledger.jobs.exists(job_id, tenant=tenant):
            raise ConflictError(f"job {job_id} already exists in this store: nothing imported")
        writes: list[tuple[str, StoredEvent]] = []
        written: list[str] = []
        present: list[str] = []
        for stream in bundle.streams:
            if stream.role not in IMPORTED_ROLES:
                continue
            stored = list(ledger.records.stored(stream.originator_id))
            for mine, theirs in zip(stream.records, stored, strict=False):
                if (mine.topic, mine.state) != (theirs.topic, theirs.state):
                    msg = (
                        f"{stream.name} is in this store with different content (version"
                        f" {theirs.originator_version}): nothing imported"
                    )
                    raise ConflictError(msg)
            if stream.role in {"job", "seal_witness"} and stored:
                raise ConflictError(f"{stream.name} already exists in this store: nothing imported")
            if len(stored) >= len(stream.records):
                present.append(stream.name)
                continue
            writes += [(stream.role, record) for record in stream.records[len(stored) :]]
            written.append(stream.name)
        ledger.records.insert(_in_log_order(ledger, job_id, writes))
        left = [s.name for s in bundle.streams if s.role not in IMPORTED_ROLES]
        return ImportSummary(job_id, tenant, len(writes), written, present, left)

    return ledger.records.racing(attempt, f"import of job {job_id}")


def _in_log_order(
    ledger: Ledger, job_id: str, writes: list[tuple[str, StoredEvent]]
) -> list[StoredEvent]:
    """The records to write, placed in this store's log as the job met them: the SEM versions
    it read (or wrote over) ahead of the job, its own SEM writes after it. A replay meets SEM as
    the tenant's log held it where the job's first record stands (`projections.replay_sem`)."""
    own = f"job:{job_id}"

    def placed(role: str, record: StoredEvent) -> int:
        if role != "sem":
            return 1
        return 2 if getattr(ledger.records.event_of(record), "source", None) == own else 0

    return [record for _, record in sorted(writes, key=lambda write: placed(*write))]
