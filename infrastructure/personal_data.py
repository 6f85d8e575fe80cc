"""Reading a job's events under seed 000 section 10: personal data in full only to an admin, logged.

Which events carry personal data is decided by the one PII classification the tree has, the safe
export's (`bundle_redaction`): values recorded under a SEM attribute the job's privacy snapshot
denies (a refusal mark included: its digest still stands for one person's secret), and every text
of the job that holds one (its input, a prompt, a trace). The job's declared privacy snapshot
decides; a job whose privacy snapshot is not in the ledger is read under the Stage-0 default.

An admin gets those events in full, and the read is first appended, signed, to the job's
tenant's `PersonalDataAccessLog` (if that write fails, nothing is served). Anyone else gets them
with the personal data replaced by ``[REDACTED:pii]``, as a safe export shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from domain.governance import Actor, Role
from domain.personal_data_access import PersonalDataAccessLog
from domain.snapshot import SnapshotKind
from domain.stage0.config import DEFAULT_PRIVACY, PrivacyPolicy, parse_config
from infrastructure.bundle_redaction import PrivacyNeedles, holds_pii, scrub_pii
from infrastructure.ledger_errors import NotFoundError
from infrastructure.ops_clock import recorded_at

if TYPE_CHECKING:
    from infrastructure.ledger import Ledger


@dataclass(frozen=True)
class JobEventsRead:
    """A job's events as one reader may see them."""

    job_id: str
    events: list[dict[str, Any]]
    personal_versions: list[int]
    """The versions (among ``events``) that carry personal data."""
    redacted: bool
    """Whether their personal data was replaced (the reader is no admin)."""


class PersonalDataReads:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def job_events(
        self,
        job_id: str,
        reader: Actor | None,
        channel: str,
        shown: Callable[[dict[str, Any]], bool] = lambda entry: True,
    ) -> JobEventsRead:
        """The job's verified events that ``shown`` keeps, as ``reader`` may see them.

        ``reader`` None: nobody identified, which sees what a non-admin sees.
        """
        stream = self.ledger.job_stream(job_id)
        started = stream[0]["payload"]
        needles = PrivacyNeedles(frozenset(self._privacy(started["snapshot_ids"]).deny_sem_attributes))
        for entry in stream:
            needles.collect(entry["payload"])
        events = [entry for entry in stream if shown(entry)]
        personal = [e["version"] for e in events if holds_pii(e["payload"], needles)]
        if not personal:
            return JobEventsRead(job_id, events, [], redacted=False)
        if reader is not None and reader.holds(Role.ADMIN):
            self._record_read(started["tenant"], reader, job_id, personal, channel)
            return JobEventsRead(job_id, events, personal, redacted=False)
        redacted = [
            {**e, "payload": scrub_pii(e["payload"], needles)} if e["version"] in personal else e
            for e in events
        ]
        return JobEventsRead(job_id, redacted, personal, redacted=True)

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
            for e in self.ledger.verifying_store.get(log)
            if isinstance(e, PersonalDataAccessLog.Read)
        ]

    def _record_read(
        self, tenant: str, reader: Actor, job_id: str, versions: list[int], channel: str
    ) -> None:
        log = PersonalDataAccessLog.id_for(tenant)
        when = recorded_at()

        def attempt() -> None:
            last = next(self.ledger.verifying_store.get(log, desc=True, limit=1), None)
            version = 0 if last is None else last.originator_version
            entry = PersonalDataAccessLog.entry(
                tenant, version, reader, job_id, versions, channel, when
            )
            self.ledger.save(*entry)

        self.ledger.retrying(attempt, f"personal data access record of {tenant}")

    def _privacy(self, snapshot_ids: dict[str, str]) -> PrivacyPolicy:
        snapshot_id = snapshot_ids.get(SnapshotKind.PRIVACY.value)
        if snapshot_id is None:
            return DEFAULT_PRIVACY
        try:
            payload = self.ledger.get_snapshot(snapshot_id).payload
        except NotFoundError:
            return DEFAULT_PRIVACY
        try:
            policy = parse_config(SnapshotKind.PRIVACY, payload)
        except ValueError:
            return DEFAULT_PRIVACY
        assert isinstance(policy, PrivacyPolicy)
        return policy
