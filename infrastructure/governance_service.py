"""Governance use cases: force-continue requests, council votes, halts and clears, the log.

Every command reads the scope's record, applies the domain's rule (roles, four eyes) and stores
the record again, retried if another writer got there first. Reached as `Ledger.governance`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from eventsourcing.utils import get_topic

from domain.governance import (
    TENANT_SNAPSHOT,
    Actor,
    Governance,
    HaltCause,
    Motion,
    Vote,
    governance_scope_of_job,
    governance_scope_of_snapshot,
    halt_scopes,
)
from domain.job import validate_tenant
from domain.naming import DEFAULT_TENANT, tenant_and_key
from domain.snapshot import Snapshot, check_snapshot_id
from infrastructure.ledger_errors import NotFoundError
from infrastructure.ops_clock import recorded_at
from infrastructure.signed_record import IntegrityFailure, verify_record

if TYPE_CHECKING:
    from infrastructure.ledger import Ledger

GOVERNANCE_EVENTS = (
    Governance.Opened,
    Governance.VoteCast,
    Governance.ForceContinueRequested,
    Governance.HaltSet,
    Governance.HaltCleared,
    Governance.ReplayRequested,
    Governance.ReplayResulted,
)
GOVERNANCE_TOPICS = tuple(get_topic(cls) for cls in GOVERNANCE_EVENTS)
PAGE = 1000
T = TypeVar("T")


class GovernanceService:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # Records

    def record(self, scope: str) -> Governance | None:
        if not self.ledger.stream_exists(Governance.id_for(scope)):
            return None
        return self.ledger.get_aggregate(
            Governance, Governance.id_for(scope), f"governance record {scope}"
        )

    def record_or_new(self, scope: str) -> Governance:
        return self.record(scope) or Governance.open(scope)

    def act_on(self, scope: str, command: Callable[[Governance], T], what: str) -> T:
        """Run a command on the scope's record and store it, again if another writer raced."""

        def attempt() -> T:
            record = self.record_or_new(scope)
            result = command(record)
            self.ledger.save(record)
            return result

        return self.ledger.retrying(attempt, what)

    def existing_job_scope(self, job_id: str, tenant: str = DEFAULT_TENANT) -> str:
        """The governance scope of the tenant's job; NotFoundError when the tenant has none."""
        name = self.ledger.job_name(job_id, tenant)
        if name is None:
            raise NotFoundError(f"no job {job_id}")
        return governance_scope_of_job(name)

    def _existing_snapshot_scope(self, snapshot_id: str, tenant: str | None) -> str:
        check_snapshot_id(snapshot_id)
        if tenant is not None:
            validate_tenant(tenant)
        if not self.ledger.stream_exists(Snapshot.id_for(snapshot_id)):
            raise NotFoundError(f"no snapshot {snapshot_id}")
        return governance_scope_of_snapshot(snapshot_id, tenant)

    def halt_reason(self, tenant: str, snapshot_id: str) -> str | None:
        """Why the tenant's replays touching the snapshot are halted (its own halt, or a
        store-wide one), or None when they are not."""
        own_scope, store_scope = halt_scopes(snapshot_id, tenant)
        own = self.record(own_scope)
        if own is not None and snapshot_id in own.halted:
            return own.halted[snapshot_id]
        store_wide = self.record(store_scope)
        if store_wide is not None and snapshot_id in store_wide.halted:
            return f"store-wide halt: {store_wide.halted[snapshot_id]}"
        return None

    # Council and admin actions

    def request_force_continue(
        self, job_id: str, reason: str, actor: Actor, *, tenant: str = DEFAULT_TENANT
    ) -> None:
        """An admin asks to continue replays of the job past a divergence."""
        scope = self.existing_job_scope(job_id, tenant)
        now = recorded_at()
        self.act_on(
            scope,
            lambda g: g.request_force_continue(reason, actor, now),
            f"force-continue request for {job_id}",
        )

    def vote(
        self,
        job_id: str,
        motion: Motion,
        vote: Vote,
        actor: Actor,
        *,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        """A council member votes on a motion for a job (the latest vote counts)."""
        scope = self.existing_job_scope(job_id, tenant)
        now = recorded_at()
        self.act_on(
            scope, lambda g: g.cast_vote(motion, vote, actor, now), f"council vote on {job_id}"
        )

    def halt_snapshot(
        self, snapshot_id: str, reason: str, actor: Actor, tenant: str | None
    ) -> None:
        """Record a security incident: the tenant's replays touching the snapshot halt until its
        council clears the halt (``tenant=None``: every tenant's, a store operator's halt)."""
        scope = self._existing_snapshot_scope(snapshot_id, tenant)
        now = recorded_at()
        self.act_on(
            scope,
            lambda g: g.halt(snapshot_id, HaltCause.SECURITY_INCIDENT, reason, actor, now),
            f"halt of snapshot {snapshot_id}",
        )

    def clear_halt(self, snapshot_id: str, actor: Actor, tenant: str | None) -> None:
        """FORCE_HALT_CLEAR: the tenant's council lifts its halt (``tenant=None``: a store-wide
        halt, by a council member who is a store operator)."""
        scope = self._existing_snapshot_scope(snapshot_id, tenant)
        now = recorded_at()
        self.act_on(
            scope, lambda g: g.clear_halt(snapshot_id, actor, now), f"clear of {snapshot_id}"
        )

    def log(
        self, job_id: str | None = None, *, tenant: str = DEFAULT_TENANT
    ) -> list[dict[str, Any]]:
        """Governance events in stored order: one job's, and the halts of its snapshots that stop
        its replays (its tenant's and store-wide ones, no other tenant's), or all of them.

        One job's log is shown as its tenant sees it: scope and ``job_id`` hold the job's own id
        (and a halt's scope the snapshot id). The store's whole log shows every job and halt by
        its id scoped by tenant.
        """
        wanted: set[str] | None = None
        if job_id is not None:
            job_scope = self.existing_job_scope(job_id, tenant)
            job = self.ledger.get_job(job_id, tenant=tenant)
            wanted = {job_scope}
            for snapshot_id in job.snapshot_ids.values():
                wanted.update(halt_scopes(snapshot_id, job.tenant))
        scopes: dict[Any, str] = {}
        entries: list[dict[str, Any]] = []
        for event in self._all_governance_events():
            if isinstance(event, Governance.Opened):
                scopes[event.originator_id] = event.scope
            scope = scopes.get(event.originator_id)
            if scope is None:
                raise IntegrityFailure(event.originator_id, 1, "governance record was never opened")
            if wanted is None:
                entries.append({"scope": scope, **_log_entry(event)})
            elif scope in wanted:
                entries.append(_as_its_tenant_sees({"scope": scope, **_log_entry(event)}))
        return entries

    def _all_governance_events(self) -> Iterator[Any]:
        """Every governance event, verified, in the order the store recorded them."""
        start = 1
        while True:
            page = self.ledger.recorder.select_notifications(start, PAGE, topics=GOVERNANCE_TOPICS)
            for notification in page:
                yield self.ledger.verifying_store.signed_mapper.decode(
                    verify_record(self.ledger.keyring, notification)
                )
            if len(page) < PAGE:
                return
            start = page[-1].id + 1


def _as_its_tenant_sees(entry: dict[str, Any]) -> dict[str, Any]:
    """A log entry with the job's (or snapshot's) own id where it held one scoped by tenant."""
    if "job_id" in entry:
        entry["job_id"] = tenant_and_key(entry["job_id"])[1]
    kind, separator, name = entry["scope"].partition(":")
    if kind in {"job", TENANT_SNAPSHOT} and separator:
        entry["scope"] = f"{kind}:{tenant_and_key(name)[1]}"
    return entry


def _log_entry(event: Any) -> dict[str, Any]:
    framing = {"originator_id", "originator_version", "timestamp", "originator_topic", "scope"}
    fields = event.model_dump(mode="json", exclude=framing)
    return {"event": type(event).LOG_NAME, "version": event.originator_version, **fields}
