"""A batch audit reads and verifies each declared snapshot once, not once per job naming it.

Snapshots are written once, by their content address, and never appended to: an audit's replays
share one read of each (per worker), and every job naming a snapshot still gets the verdict a
replay of it alone gives: a snapshot deleted below the newest checkpoint makes each of them
``MISSING_SNAPSHOT`` (with the checkpoint's evidence), one whose bytes were edited makes each an
integrity failure. On checkpointed stores, as every CLI write leaves them; both stores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from support.ledger_fixtures import RawTable, store_of

from domain.snapshot import Snapshot
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from projections.audit import AuditReport, AuditScope, Verdict

JOBS = 4


def record_jobs(ledger: Ledger) -> list[str]:
    """``JOBS`` Stage-0 jobs under the default snapshots, the store checkpointed after them."""
    names = [ledger.jobs.run(f"What is {n} + 3?", f"s{n}").job_id for n in range(JOBS)]
    ledger.checkpoints.write()
    return names


def audited(ledger: Ledger, settings: Settings) -> AuditReport:
    with AuditWorkers(settings, 1) as one:
        return ledger.audits.audit(AuditScope(), one)


@contextmanager
def snapshot_reads(ledger: Ledger) -> Iterator[Counter[UUID]]:
    """How many times each snapshot stream is read through the recorder while the block runs."""
    recorder = store_of(ledger).recorder
    snapshots = {Snapshot.id_for(sid) for sid in ledger.snapshots.default_ids().values()}
    read: Counter[UUID] = Counter()
    originals = {name: getattr(recorder, name) for name in ("select_events", "select_streams")}

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def reads(streams: UUID | Sequence[UUID], *args: Any, **kwargs: Any) -> Any:
            named = [streams] if isinstance(streams, UUID) else list(streams)
            read.update(stream for stream in named if stream in snapshots)
            return original(streams, *args, **kwargs)

        return reads

    for name, original in originals.items():
        setattr(recorder, name, counting(original))
    try:
        yield read
    finally:
        for name in originals:
            delattr(recorder, name)


def test_each_snapshot_is_read_once_an_audit_not_once_a_job(
    ledger: Ledger, settings: Settings
) -> None:
    names = record_jobs(ledger)
    with snapshot_reads(ledger) as read:
        report = audited(ledger, settings)
    assert report.ok, report.summary()
    assert {job.job: job.verdict for job in report.findings.jobs} == dict.fromkeys(
        names, Verdict.OK
    )
    defaults = ledger.snapshots.default_ids().values()
    assert read == Counter({Snapshot.id_for(sid): 1 for sid in defaults})


def test_a_deleted_snapshot_fails_every_job_naming_it(
    ledger: Ledger, settings: Settings, raw_table: RawTable
) -> None:
    names = record_jobs(ledger)
    router = ledger.snapshots.default_ids()["router"]
    raw_table.delete(Snapshot.id_for(router), 1)
    report = audited(ledger, settings)
    assert not report.ok
    for job in report.findings.jobs:
        assert (job.verdict, job.code) == (Verdict.NOT_REPLAYABLE, "MISSING_SNAPSHOT"), job
        assert f"router {router} (deleted: checkpoint" in job.detail
    assert sorted(job.job for job in report.findings.jobs) == sorted(names)


def test_an_edited_snapshot_fails_every_job_naming_it(
    ledger: Ledger, settings: Settings, raw_table: RawTable
) -> None:
    names = record_jobs(ledger)
    router = Snapshot.id_for(ledger.snapshots.default_ids()["router"])
    state = raw_table.state(router, 1)
    raw_table.set_column(router, 1, "state", state.replace(b"route", b"ROUTE", 1))
    report = audited(ledger, settings)
    assert not report.ok
    for job in report.findings.jobs:
        assert (job.verdict, job.code) == (Verdict.INTEGRITY_FAILURE, "INTEGRITY_FAILURE"), job
        assert str(router) in job.detail
    assert sorted(job.job for job in report.findings.jobs) == sorted(names)
