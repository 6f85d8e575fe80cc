"""An audit checks each event's MAC once, in its own read, by a `RecordCheck` keyed for its
range (counted in `test_replay_counts.py`); a record that check does not accept is judged by the
general path of a stream read (`verify_record`), which says what is wrong with it: only that
record, and with the message a read of the job gives. Both stores, checkpointed as CLI writes
leave them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from support.ledger_fixtures import RawTable

from domain.errors import IntegrityFailure
from domain.job import Job
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records import integrity
from infrastructure.storage.records.signed_record import verify_record
from infrastructure.storage.settings import Settings
from projections.audit import AuditScope, Verdict


def test_a_record_its_read_does_not_accept_is_judged_with_the_general_message(
    ledger: Ledger, settings: Settings, raw_table: RawTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = ledger.jobs.run("What is 2 + 3?", "s1").job_id
    ledger.checkpoints.write()
    stream = Job.id_for(name)
    state = raw_table.state(stream, 2)
    raw_table.set_column(stream, 2, "state", state.replace(b"What is", b"Who is", 1))
    with pytest.raises(IntegrityFailure) as read:
        ledger.jobs.get(name)
    judged: Counter[tuple[Any, int]] = Counter()

    def verifying(keyring: Any, stored: StoredEvent) -> Any:
        judged[stored.originator_id, stored.originator_version] += 1
        return verify_record(keyring, stored)

    monkeypatch.setattr(integrity, "verify_record", verifying)
    with AuditWorkers(settings, 1) as one:
        report = ledger.audits.audit(AuditScope(), one)
    (job,) = report.findings.jobs
    assert (job.verdict, job.code) == (Verdict.INTEGRITY_FAILURE, "INTEGRITY_FAILURE")
    assert job.detail == read.value.message
    assert "MAC mismatch" in job.detail
    # Only the record that failed went the general way, which said why.
    assert [position for position in judged if position[0] == stream] == [(stream, 2)]
