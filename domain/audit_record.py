"""The audit record: one batch audit's signed result (``mace audit``), not one replay per job.

It says who audited, in which roles, which part of the log (the notification ids after ``since``
up to ``through``, and the first and last actually scanned), for which tenant (None: every one),
the totals, and the SHA-256 of the canonical per-job results, so that the report printed or kept
elsewhere can be held to the record. What the audit checked and what it could not check are kept
with it, as it said them.

No store-wide counter numbers audits: a record is named by a digest of what it says (the
actor, the range, the tenant and the results' digest) and the first number ``n`` under that
digest that is free, as derived job ids are (`JobService.id_for`). Audits that differ never
touch each other's streams; two identical ones race for the same name and the loser counts on.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import digest


def audit_name(summary: dict[str, Any], number: int) -> str:
    """The record's name: the first 16 hex digits of ``summary``'s digest and its number."""
    return f"{digest(summary)[:16]}-{number}"


class AuditRecord(MaceAggregate):
    NAME_PREFIX = "audit"
    NAME_FIELD = "audit_id"

    class Recorded(MaceAggregate.Created):
        audit_id: str
        actor_id: str
        roles: list[str]
        tenant: str | None
        since: int
        through: int
        first_notification_id: int | None
        last_notification_id: int | None
        totals: dict[str, int]
        not_replayable: dict[str, int]
        results_digest: str
        checked: list[str]
        not_checked: list[str]
        recorded_at: str  # when the auditor acted (ops metadata, never decision input)

    @event(Recorded)
    def __init__(
        self,
        audit_id: str,
        actor_id: str,
        roles: list[str],
        tenant: str | None,
        since: int,
        through: int,
        first_notification_id: int | None,
        last_notification_id: int | None,
        totals: dict[str, int],
        not_replayable: dict[str, int],
        results_digest: str,
        checked: list[str],
        not_checked: list[str],
        recorded_at: str,
    ) -> None:
        self.audit_id = audit_id
        self.actor_id = actor_id
        self.roles = list(roles)
        self.tenant = tenant
        self.since = since
        self.through = through
        self.first_notification_id = first_notification_id
        self.last_notification_id = last_notification_id
        self.totals = dict(totals)
        self.not_replayable = dict(not_replayable)
        self.results_digest = results_digest
        self.checked = list(checked)
        self.not_checked = list(not_checked)
        self.recorded_at = recorded_at
