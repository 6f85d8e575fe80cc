"""An audit checks each event's MAC once, in its own read (`RecordCheck`), not again through the
general path of a stream read (`verify_record`, which names what is wrong with a record that
fails): counted, never timed, so that a second check or the slower path coming back fails here.
Both stores, on checkpointed stores as CLI writes leave them. A record that does not hold is still
judged by `verify_record`, with its message (here, and in `test_audit.py`, `test_tampering.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent
from support.ledger_fixtures import RawTable

from domain.job import Job, JobSealWitness
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records import integrity, signed_record
from infrastructure.storage.settings import Settings
from projections.audit import AuditReport, AuditScope, Verdict

JOBS = 3
STAGE0_RECORDS = 7
"""A Stage-0 job's stream: its start, five facts, its seal."""


@contextmanager
def mac_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Counter[UUID]]]:
    """By stream, the records checked while the block runs: ``general`` by `verify_record` (as
    a stream read calls it), ``in_read`` by `RecordCheck` as an audit's read takes them."""
    counted: dict[str, Counter[UUID]] = {"general": Counter(), "in_read": Counter()}
    general = integrity.verify_record
    in_read = signed_record.RecordCheck.verified

    def verifying(keyring: Any, stored: StoredEvent) -> Any:
        counted["general"][stored.originator_id] += 1
        return general(keyring, stored)

    def checking(check: signed_record.RecordCheck, stored: StoredEvent) -> Any:
        counted["in_read"][stored.originator_id] += 1
        return in_read(check, stored)

    with monkeypatch.context() as patch:
        patch.setattr(integrity, "verify_record", verifying)
        patch.setattr(signed_record.RecordCheck, "verified", checking)
        yield counted


def audited(ledger: Ledger, settings: Settings) -> AuditReport:
    with AuditWorkers(settings, 1) as one:
        return ledger.audits.audit(AuditScope(), one)


def test_an_audit_checks_each_event_of_a_job_once_in_its_own_read(
    ledger: Ledger, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [ledger.jobs.run(f"What is {n} + 3?", f"s{n}").job_id for n in range(JOBS)]
    ledger.checkpoints.write()
    with mac_checks(monkeypatch) as counted:
        report = audited(ledger, settings)
    assert report.ok, report.summary()
    assert {job.job: job.verdict for job in report.findings.jobs} == dict.fromkeys(
        names, Verdict.OK
    )
    jobs = {Job.id_for(name) for name in names}
    witnesses = {JobSealWitness.id_for(name) for name in names}
    assert {stream: counted["in_read"][stream] for stream in jobs | witnesses} == {
        **dict.fromkeys(jobs, STAGE0_RECORDS),
        **dict.fromkeys(witnesses, 1),
    }
    assert not [stream for stream in counted["general"] if stream in jobs | witnesses]


def test_a_record_its_read_does_not_accept_is_judged_with_the_general_message(
    ledger: Ledger, settings: Settings, raw_table: RawTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = ledger.jobs.run("What is 2 + 3?", "s1").job_id
    ledger.checkpoints.write()
    stream = Job.id_for(name)
    state = raw_table.state(stream, 2)
    raw_table.set_column(stream, 2, "state", state.replace(b"What is", b"Who is", 1))
    with mac_checks(monkeypatch) as counted:
        report = audited(ledger, settings)
    (job,) = report.findings.jobs
    assert (job.verdict, job.code) == (Verdict.INTEGRITY_FAILURE, "INTEGRITY_FAILURE")
    assert "MAC mismatch" in job.detail
    # Only the record that failed went the general way, which said why.
    assert counted["general"][stream] == 1
