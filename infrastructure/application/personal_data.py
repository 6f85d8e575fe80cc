"""Reading a job's events under seed 000 section 10: personal data in full only to an admin, logged.

Which events carry personal data is decided by the one PII classification the tree has, the safe
export's (`bundle_redaction`): values recorded under a SEM attribute the job's privacy snapshot
denies (a refusal mark included: its digest still stands for one person's secret), and every text
of the job that holds one (its input, a prompt, a trace). The job's declared privacy snapshot
decides (`privacy_rules`).

An admin gets those events in full, and the read is first appended, signed, to the job's
tenant's `PersonalDataAccessLog` (if that write fails, nothing is served). Anyone else gets them
with the personal data replaced by ``[REDACTED:pii]``, as a safe export shows it.

Values kept outside any job (a SEM entry, a tenant's memories, the receipts of contexts assembled
from them) are read the same way (`projections.redaction.shown_kept`, `shown_receipt`): in full to
an admin, redacted to anyone else. Their writes refuse personal data
(`domain.sensitive_data.refuse_sensitive`); a store written before may still hold some.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain.governance import Actor
from domain.personal_data_access import PersonalDataAccessLog
from infrastructure.application.jobs import JobService
from infrastructure.application.privacy_rules import PrivacyRules
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.store import LedgerStore
from projections.redaction import PrivacyNeedles, holds_pii, reads_in_full, scrub_pii

HTTP_CHANNEL = "http"
CLI_CHANNEL = "cli"
REEXECUTION_CHANNEL = "reexecution"
"""A re-execution hands the job's recorded content to the agent's code, whatever the transport."""


@dataclass(frozen=True)
class JobRead:
    """A job's events and how much of their personal data one reader may see."""

    job_id: str
    events: list[dict[str, Any]]
    """The verified events chosen, as stored."""
    personal_versions: list[int]
    """The versions (among ``events``) that carry personal data."""
    in_full: bool
    """True for an admin (the read is recorded) or when no chosen event carries personal data."""
    needles: PrivacyNeedles

    def show(self, value: Any) -> Any:
        """``value`` (any view of this job) as this reader may see it."""
        return value if self.in_full else scrub_pii(value, self.needles)

    def shown_events(self) -> list[dict[str, Any]]:
        return [self.show(entry) for entry in self.events]


class PersonalDataReads:
    def __init__(self, store: LedgerStore, jobs: JobService, privacy: PrivacyRules) -> None:
        self.store = store
        self.jobs = jobs
        self.privacy = privacy

    def read_job(
        self,
        job_id: str,
        tenant: str,
        reader: Actor | None,
        channel: str,
        chosen: Callable[[dict[str, Any]], bool] = lambda entry: True,
    ) -> JobRead:
        """The tenant's job's verified events that ``chosen`` keeps, for ``reader`` (None:
        anonymous). An admin's read of events carrying personal data is recorded, in the
        tenant's access log, before it is returned.
        """
        stream = self.jobs.stream(job_id, tenant=tenant)
        started = stream[0]["payload"]
        denied = self.privacy.of(started["snapshot_ids"]).deny_sem_attributes
        needles = PrivacyNeedles(frozenset(denied))
        for entry in stream:
            needles.collect(entry["payload"])
        events = [entry for entry in stream if chosen(entry)]
        personal = [e["version"] for e in events if holds_pii(e["payload"], needles)]
        admin = reads_in_full(reader)
        if personal and admin:
            assert reader is not None
            self._record_read(tenant, reader, job_id, personal, channel)
        return JobRead(job_id, events, personal, admin or not personal, needles)

    def withheld_from(self, job_id: str, tenant: str, reader: Actor, channel: str) -> str | None:
        """Why the tenant's job may not be handed whole to ``reader`` (a re-execution gives the
        code every recorded answer, which cannot be redacted and still answer it): a line naming
        the events carrying personal data, for anyone but an admin; None otherwise. An admin's
        read of them is recorded first (`read_job`)."""
        read = self.read_job(job_id, tenant, reader, channel)
        if read.in_full:
            return None
        versions = ", ".join(f"v{version}" for version in read.personal_versions)
        return (
            f"job {job_id} holds personal data (events {versions}): re-executing hands it to the"
            " code unredacted, which only an admin may be given (and the read is logged)"
        )

    def accesses(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's recorded reads of personal data, oldest first."""
        log = PersonalDataAccessLog.id_for(tenant)
        return [
            {
                "version": e.originator_version,
                "actor": e.actor,
                "job_id": e.job_id,
                "versions": e.versions,
                "channel": e.channel,
                "accessed_at": e.accessed_at,
            }
            for e in self.store.verifying_store.get(log)
            if isinstance(e, PersonalDataAccessLog.Read)
        ]

    def _record_read(
        self, tenant: str, reader: Actor, job_id: str, versions: list[int], channel: str
    ) -> None:
        log = PersonalDataAccessLog.id_for(tenant)
        when = recorded_at()

        def attempt(version: int) -> None:
            entry = PersonalDataAccessLog.entry(
                tenant, version, reader, job_id, versions, channel, when
            )
            self.store.save(*entry)

        self.store.numbered(log, attempt, f"personal data access record of {tenant}")
