"""Batch audit (``mace audit``): every job replayed from one read of the log, one signed result.

The card's "replay is a projection rebuild", for the whole ledger at once: the log is read once
in notification order, split by stream id among workers (`audit_workers`), each event verified
and each completed job replayed in audit mode through the live replay (`audit_scan`). Then the
streams are held to the newest checkpoint: its head index, proven against its signed root, names
every stream it covers and how long it was, so a job deleted whole (or cut short) below it is
an integrity failure, not a job the audit never heard of. The report says per job ok, diverged
(with the first divergence), integrity failure, not replayable (and why) or open, with totals
and what the audit could not check; `record` stores its signed summary (`AuditRecord`).

Reached as ``ledger.audits``. The audit reads where `Ledger.open_for_reading` reads (a read
store when ``MACE_READ_STORE`` is set); its record is written to ``MACE_STORE``'s ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID

from domain.audit_record import AuditRecord, audit_name
from domain.errors import IntegrityFailure
from domain.governance import Actor
from domain.job import Job
from domain.replay_access import check_audit_roles
from infrastructure.application.audit_scan import AuditWindow, RangeAudit
from infrastructure.application.jobs import JobService
from infrastructure.application.replays import ReplayService
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.records.integrity import SealFacts, check_witness
from infrastructure.storage.store import LedgerStore
from infrastructure.storage.verification.checkpoint_chain import proven_heads
from infrastructure.storage.verification.scan import StoreReader, StreamRange
from projections.audit import (
    AuditFindings,
    AuditReport,
    AuditScope,
    StreamFailure,
    coverage,
)

Progress = Callable[[int, int], None]
"""Told the events read so far, by every worker, and how many the window holds."""


class Workers(Protocol):
    """Who reads the log: `audit_workers.AuditWorkers`, processes started before any store was
    opened (this process takes the first range itself)."""

    def run(
        self, audits: AuditService, window: AuditWindow, progress: Callable[[int], None]
    ) -> AuditFindings:
        """Every range audited (the first here, through ``audits``), findings merged."""


def check_auditor(actor: Actor) -> None:
    """An audit replays every job in audit mode: who may replay in that mode may audit."""
    check_audit_roles(actor, "an audit")


def audit_answer(report: AuditReport, record: AuditRecord, workers: int) -> dict[str, Any]:
    """The audit as ``mace audit --json`` and ``POST /v1/audits`` answer it."""
    return {
        "ok": report.ok,
        "audit_id": record.audit_id,
        "workers": workers,
        **report.summary(),
        **report.results(),
    }


class AuditService:
    def __init__(self, store: LedgerStore, jobs: JobService, replays: ReplayService) -> None:
        self.store = store
        self.jobs = jobs
        self.replays = replays

    def audit(
        self, scope: AuditScope, workers: Workers, progress: Progress | None = None
    ) -> AuditReport:
        """Audit the log as it stands now (up to its head when the audit begins)."""
        checkpoints = self.store.checkpoints
        assert checkpoints is not None  # a store opened from settings has its checkpoint key
        failures: list[StreamFailure] = []
        try:
            newest, proven = proven_heads(checkpoints)
            heads = {str(stream): head for stream, head in proven.items()}
        except IntegrityFailure as failure:
            # The index does not hold: no stream can be held to it, and the audit says why.
            failures.append(StreamFailure(failure.stream, failure.version, failure.reason))
            newest, heads = None, {}
        # Read after the checkpoint: every event it covers is at or below the head.
        through = self.store.recorder.max_notification_id() or 0
        checkpoint = None if newest is None else newest.checkpoint
        checkpointed = 0 if checkpoint is None else checkpoint.last_notification_id
        window = AuditWindow(scope, through, checkpointed)
        # Notification ids may skip numbers (PostgreSQL): the bar may end a little short.
        total = max(0, through - scope.since)

        def read_so_far(done: int) -> None:
            if progress is not None:
                progress(done, total)

        found = workers.run(self, window, read_so_far)
        stored = self._last_versions_unseen(heads, found) if scope.since else {}
        found.stream_failures += failures + _short_of(heads, found, stored)
        _hold_seals_to_witnesses(found)
        found = found.ordered()
        if scope.tenant is not None:
            found = found.for_tenant(scope.tenant)
        checked, not_checked = coverage(
            scope,
            through,
            None if checkpoint is None else checkpoint.number,
            found.not_checkpointed,
        )
        number = None if checkpoint is None else checkpoint.number
        return AuditReport(scope, through, number, found, checked, not_checked)

    def _last_versions_unseen(self, heads: dict[str, int], found: AuditFindings) -> dict[str, int]:
        """The last stored version of each stream the checkpoint counts that the scan did not
        meet (with ``since``: no event of it after the window's start)."""
        unseen = [UUID(stream) for stream in heads if stream not in found.heads]
        if not unseen:
            return {}
        table = getattr(self.store.recorder, "events_table_name", None)
        assert isinstance(table, str)
        with StoreReader(self.store.location, table) as reader:
            return {
                str(stream): version for stream, version in reader.last_versions(unseen).items()
            }

    def audit_range(
        self, window: AuditWindow, streams: StreamRange, progress: Callable[[int], None]
    ) -> AuditFindings:
        """One worker's part: the streams in ``streams`` (`audit_scan`)."""
        return RangeAudit(self.store, self.jobs, self.replays, window).run(streams, progress)

    def record(self, report: AuditReport, actor: Actor) -> AuditRecord:
        """Store the audit's signed summary under the first free name its content gives."""
        summary = {
            "actor_id": actor.actor_id,
            "roles": sorted(actor.roles),
            **report.summary(),
        }
        naming = {k: summary[k] for k in ("actor_id", "tenant", "since", "through")}
        naming["results_digest"] = summary["results_digest"]
        now = recorded_at()
        return self.store.save_first_free(
            lambda number: AuditRecord.id_for(audit_name(naming, number)),
            lambda number: AuditRecord(
                audit_id=audit_name(naming, number), recorded_at=now, **summary
            ),
            "audit record",
        )


def _short_of(
    heads: dict[str, int], found: AuditFindings, stored: dict[str, int]
) -> list[StreamFailure]:
    """Streams the newest checkpoint counts that the log no longer holds as far (or at all):
    as the scan met them, or, for those it did not meet (``since``), as ``stored`` says."""
    short = []
    for stream, head in sorted(heads.items()):
        held = found.heads.get(stream, stored.get(stream, 0))
        if held < head:
            reason = (
                f"the newest checkpoint counts {head} events of this stream, the log holds {held}"
            )
            short.append(StreamFailure(stream, held + 1, reason))
    return short


def _hold_seals_to_witnesses(found: AuditFindings) -> None:
    """Every seal the scan met has its witness, saying the same, and every witness its seal
    (`check_witness`, as every read of a job holds them): else the job, when it was judged, is an
    integrity failure, and otherwise its stream is."""
    for name in sorted(found.seals.keys() | found.witnesses.keys()):
        if name not in found.seals and str(Job.id_for(name)) in found.earlier_seals:
            continue  # its seal was met, its job begun before the window: neither is judged
        stream, version, count, mac_digest = found.seals.get(name, ("", 0, 0, ""))
        seal = SealFacts(count, mac_digest) if stream else None
        witnessed = found.witnesses.get(name)
        witness = None if witnessed is None else SealFacts(*witnessed)
        try:
            check_witness(Job.id_for(name), version, seal, witness)
        except IntegrityFailure as failure:
            if not found.failed_job(name, failure.message):
                found.stream_failures.append(
                    StreamFailure(failure.stream, failure.version, failure.reason)
                )
