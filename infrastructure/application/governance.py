"""Governance use cases: force-continue requests, council votes, halts and clears, the log.

Every command reads the scope's record, applies the domain's rule (roles, four eyes) and stores
the record again, read and applied afresh whenever another writer got there first, within the
store's retry budget (see `store_racing`). The log says of every REPLAY_REQUEST whether its
result is recorded, or it is still running, or it was abandoned (see `replay_leases`). Reached
as ``ledger.governance``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar
from uuid import UUID

from eventsourcing.utils import get_topic

from domain.aggregate import MaceAggregate
from domain.errors import IntegrityFailure, NotFoundError
from domain.governance import (
    TENANT_SNAPSHOT,
    Actor,
    Governance,
    HaltCause,
    Motion,
    ReplayRequestFields,
    Vote,
    governance_scope_of_job,
    governance_scope_of_snapshot,
    halt_scopes,
    seen_by_tenant,
)
from domain.job import validate_tenant
from domain.naming import DEFAULT_TENANT, tenant_and_key
from domain.snapshot import Snapshot, check_snapshot_id
from infrastructure.application.jobs import JobService
from infrastructure.storage.backends.replay_leases import replay_leases
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.records.signed_record import verify_record
from infrastructure.storage.settings import Store
from infrastructure.storage.store import LedgerStore

GOVERNANCE_EVENTS = (
    Governance.Opened,
    Governance.VoteCast,
    Governance.ForceContinueRequested,
    Governance.HaltSet,
    Governance.HaltCleared,
    Governance.ReplayRequested,
    Governance.OpenedByReplay,
    Governance.ReplayResulted,
)
GOVERNANCE_TOPICS = tuple(get_topic(cls) for cls in GOVERNANCE_EVENTS)
REPLAY_TOPICS = tuple(
    get_topic(cls)
    for cls in (Governance.ReplayRequested, Governance.OpenedByReplay, Governance.ReplayResulted)
)
PAGE = 1000
T = TypeVar("T")

RECORDED: Final = "recorded"
RUNNING: Final = "running"
ABANDONED: Final = "abandoned"
UNRESOLVED: Final = "unresolved"
"""On a read store: no result there and no lease held on the primary. Abandoned, or answered on
the primary after the read store's head: a copy that lags cannot tell which."""
Attempt = tuple[str, int]
"""A replay attempt: (job id, attempt number)."""


@dataclass(frozen=True)
class UnansweredReplay:
    """A REPLAY_REQUEST without a REPLAY_RESULT: ``running``, or ``abandoned`` for good."""

    request: ReplayRequestFields
    status: str

    def as_json(self) -> dict[str, Any]:
        request = self.request
        return {
            "job_id": request.job_id,
            "attempt": request.attempt,
            "mode": request.mode,
            "actor_id": request.actor_id,
            "requested_at": request.recorded_at,
            "status": self.status,
        }


def halt_reason_in(
    snapshot_id: str, own: Governance | None, store_wide: Governance | None
) -> str | None:
    """Why replays touching the snapshot are halted by the tenant's own halt record or the
    store-wide one (`halt_scopes`), or None when neither halts it."""
    if own is not None and snapshot_id in own.halted:
        return own.halted[snapshot_id]
    if store_wide is not None and snapshot_id in store_wide.halted:
        return f"store-wide halt: {store_wide.halted[snapshot_id]}"
    return None


class GovernanceService:
    def __init__(self, store: LedgerStore, jobs: JobService, leases: Store | None = None) -> None:
        """``leases``: the store whose replay leases tell running from abandoned, if not
        ``store``: a read store's are its primary's, where replays run and hold them."""
        self.store = store
        self.jobs = jobs
        self.leases = replay_leases(leases or store.location)

    # Records

    def record(self, scope: str) -> Governance | None:
        return self.store.repository.find(Governance, Governance.id_for(scope))

    def records(self, scopes: Sequence[str]) -> dict[str, Governance | None]:
        """The scopes' records (None: none yet), read together."""
        streams = {scope: Governance.id_for(scope) for scope in scopes}
        found = self.store.repository.get_many(Governance, list(streams.values()))
        return {scope: found[stream] for scope, stream in streams.items()}

    def record_or_new(self, scope: str) -> Governance:
        return self.record(scope) or Governance.open(scope)

    def act_on(self, scope: str, command: Callable[[Governance], T], what: str) -> T:
        """Run a command on the scope's record and store it, again if another writer raced."""

        def attempt() -> tuple[T, Sequence[MaceAggregate]]:
            record = self.record_or_new(scope)
            return command(record), [record]

        return self.store_racing(attempt, what)

    def store_racing(self, build: Callable[[], tuple[T, Sequence[MaceAggregate]]], what: str) -> T:
        """Build aggregates from fresh reads and save them, by the one race policy
        (`LedgerStore.racing`): built and saved again whenever the save lost a race, an
        `IntegrityFailure` when it conflicted with no other writer."""

        def attempt() -> T:
            result, aggregates = build()
            self.store.save(*aggregates)
            return result

        return self.store.racing(attempt, what)

    def existing_job_scope(self, job_id: str, tenant: str = DEFAULT_TENANT) -> str:
        """The governance scope of the tenant's job; NotFoundError when the tenant has none."""
        return governance_scope_of_job(self.jobs.owned_name(job_id, tenant))

    def _existing_snapshot_scope(self, snapshot_id: str, tenant: str | None) -> str:
        check_snapshot_id(snapshot_id)
        if tenant is not None:
            validate_tenant(tenant)
        if not self.store.stream_exists(Snapshot.id_for(snapshot_id)):
            raise NotFoundError(f"no snapshot {snapshot_id}")
        return governance_scope_of_snapshot(snapshot_id, tenant)

    def halt_reason(self, tenant: str, snapshot_id: str) -> str | None:
        """Why the tenant's replays touching the snapshot are halted (its own halt, or a
        store-wide one), or None when they are not."""
        scopes = halt_scopes(snapshot_id, tenant)
        records = self.records(scopes)
        return halt_reason_in(snapshot_id, *(records[scope] for scope in scopes))

    # Council and admin actions

    # Each action answers what it recorded, the one body ``mace governance ... --json`` prints
    # and the HTTP service answers.

    def request_force_continue(
        self, job_id: str, reason: str, actor: Actor, *, tenant: str = DEFAULT_TENANT
    ) -> dict[str, Any]:
        """An admin asks to continue replays of the job past a divergence."""
        scope = self.existing_job_scope(job_id, tenant)
        now = recorded_at()
        self.act_on(
            scope,
            lambda g: g.request_force_continue(reason, actor, now),
            f"force-continue request for {job_id}",
        )
        return {"job_id": job_id, "requested": Motion.FORCE_CONTINUE.value, "by": actor.as_json()}

    def vote(
        self,
        job_id: str,
        motion: Motion,
        vote: Vote,
        actor: Actor,
        *,
        tenant: str = DEFAULT_TENANT,
    ) -> dict[str, Any]:
        """A council member votes on a motion for a job (the latest vote counts)."""
        scope = self.existing_job_scope(job_id, tenant)
        now = recorded_at()
        self.act_on(
            scope, lambda g: g.cast_vote(motion, vote, actor, now), f"council vote on {job_id}"
        )
        return {
            "job_id": job_id,
            "motion": motion.value,
            "vote": vote.value,
            "by": actor.as_json(),
        }

    def halt_snapshot(
        self, snapshot_id: str, reason: str, actor: Actor, tenant: str | None
    ) -> dict[str, Any]:
        """Record a security incident: the tenant's replays touching the snapshot halt until its
        council clears the halt (``tenant=None``: every tenant's, a store operator's halt)."""
        scope = self._existing_snapshot_scope(snapshot_id, tenant)
        now = recorded_at()
        self.act_on(
            scope,
            lambda g: g.halt(snapshot_id, HaltCause.SECURITY_INCIDENT, reason, actor, now),
            f"halt of snapshot {snapshot_id}",
        )
        return _halt_answer(snapshot_id, True, tenant, actor)

    def clear_halt(self, snapshot_id: str, actor: Actor, tenant: str | None) -> dict[str, Any]:
        """FORCE_HALT_CLEAR: the tenant's council lifts its halt (``tenant=None``: a store-wide
        halt, by a council member who is a store operator)."""
        scope = self._existing_snapshot_scope(snapshot_id, tenant)
        now = recorded_at()
        self.act_on(
            scope, lambda g: g.clear_halt(snapshot_id, actor, now), f"clear of {snapshot_id}"
        )
        return _halt_answer(snapshot_id, False, tenant, actor)

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
            job = self.jobs.get(job_id, tenant=tenant)
            wanted = {job_scope}
            for snapshot_id in job.snapshot_ids.values():
                wanted.update(halt_scopes(snapshot_id, job.tenant))
        entries, requests = self.store.held_to_heads(lambda: self._read_log(wanted))
        if wanted is None:
            # No stream the whole log shows names a governance record deleted whole.
            self.store.require_whole_log()
        leases = {attempt: entry["lease"] for attempt, entry in requests.items()}
        for attempt, status in self._unanswered_status(leases).items():
            requests[attempt]["result"] = status
        return entries

    def tenant_log(self, tenant: str) -> list[dict[str, Any]]:
        """The governance events the tenant sees (`domain.governance.seen_by_tenant`: its jobs'
        requests, votes, approvals and results, its halts and clears, and the store-wide ones),
        in stored order, each as its tenant sees it: the dashboard's governance page."""
        entries, requests = self.store.held_to_heads(lambda: self._read_log(None, tenant))
        # Read from the whole log: no record the tenant sees may have been deleted whole.
        self.store.require_whole_log()
        leases = {attempt: entry["lease"] for attempt, entry in requests.items()}
        for attempt, status in self._unanswered_status(leases).items():
            requests[attempt]["result"] = status
        return entries

    def _read_log(
        self, wanted: set[str] | None, tenant: str | None = None
    ) -> tuple[tuple[list[dict[str, Any]], dict[Attempt, dict[str, Any]]], dict[UUID, int]]:
        """The log's entries of the ``wanted`` scopes (None: all; with ``tenant``, those it
        sees), the requests among them by attempt, and the last version shown of each record
        shown (0: a wanted one that has no event), for `LedgerStore.held_to_heads`. A record
        shown with a version missing between two it holds fails closed: the log would show it
        without that event."""
        scopes: dict[Any, str] = {}
        entries: list[dict[str, Any]] = []
        requests: dict[Attempt, dict[str, Any]] = {}
        reached = {Governance.id_for(scope): 0 for scope in wanted or ()}
        for event in self._all_governance_events():
            if isinstance(event, Governance.Opened):
                scopes[event.originator_id] = event.scope
            scope = scopes.get(event.originator_id)
            if scope is None:
                raise IntegrityFailure(event.originator_id, 1, "governance record was never opened")
            shown = scope in wanted if wanted is not None else tenant is None
            if shown or (tenant is not None and seen_by_tenant(scope, tenant)):
                stream, version = event.originator_id, event.originator_version
                if version != reached.get(stream, 0) + 1:
                    missing = reached.get(stream, 0) + 1
                    reason = f"version {missing} is missing (next stored is {version})"
                    raise IntegrityFailure(stream, missing, reason)
                reached[stream] = version
                entry = {"scope": scope, **_log_entry(event)}
                if isinstance(event, ReplayRequestFields):
                    entry["result"] = RECORDED
                    requests[(event.job_id, event.attempt)] = entry
                elif isinstance(event, Governance.ReplayResulted):
                    requests.pop((event.job_id, event.attempt), None)
                whole = wanted is None and tenant is None
                entries.append(entry if whole else _as_its_tenant_sees(entry))
        return (entries, requests), reached

    def unanswered_replays(self) -> list[UnansweredReplay]:
        """Every REPLAY_REQUEST without a REPLAY_RESULT, in stored order, running or abandoned."""
        waiting: dict[Attempt, ReplayRequestFields] = {}
        for event in self._all_governance_events(REPLAY_TOPICS):
            attempt = (event.job_id, event.attempt)
            if isinstance(event, ReplayRequestFields):
                waiting[attempt] = event
            else:
                waiting.pop(attempt, None)
        statuses = self._unanswered_status({a: r.lease for a, r in waiting.items()})
        return [
            UnansweredReplay(request, statuses[attempt])
            for attempt, request in waiting.items()
            if attempt in statuses
        ]

    def with_unanswered(self, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows of the replay outcomes view, each ``pending`` one as running or abandoned.

        The view has only the events to go by: an attempt without a result is pending there.
        Only the jobs of pending rows are read. A pending row whose result was stored since the
        view was read stays pending.
        """
        rows = list(rows)
        # A row names the job as its tenant does; the records and events, by its stored name.
        stored: dict[tuple[Any, ...], Attempt] = {}
        for row in rows:
            if row["outcome"] == "pending" and row.get("tenant") is not None:
                name = self.jobs.name(row["job_id"], row["tenant"])
                if name is not None:
                    stored[(row["tenant"], row["job_id"], row["attempt"])] = (name, row["attempt"])
        scopes = {name: governance_scope_of_job(name) for name, _ in stored.values()}
        held = self.records(list(scopes.values()))
        records = {name: held[scope] for name, scope in scopes.items()}
        leases = {
            (name, attempt): record.replay_leases.get(attempt)
            for name, attempt in stored.values()
            if (record := records[name]) is not None and attempt not in record.replay_results
        }
        status = self._unanswered_status(leases)

        def shown(row: dict[str, Any]) -> dict[str, Any]:
            attempt = stored.get((row.get("tenant"), row["job_id"], row["attempt"]))
            return row if attempt not in status else {**row, "outcome": status[attempt]}

        return [shown(row) for row in rows]

    def _unanswered_status(self, leases: dict[Attempt, str | None]) -> dict[Attempt, str]:
        """Of attempts read without a result: ``running`` or ``abandoned`` (``unresolved`` on a
        read store); absent: answered since.

        Running while the lease named in the request is held. A lease is let go only after the
        result is stored or its holder gave up (or died), so an attempt whose lease is not held
        and whose record, read again now, still has no result will never get one. A request
        that names no lease comes from a process that took none: it can only be abandoned.
        """
        held = self.leases.held(lease for lease in leases.values() if lease is not None)
        records: dict[str, Governance | None] = {}
        statuses: dict[Attempt, str] = {}
        for (job_id, attempt), lease in leases.items():
            if lease is not None and lease in held:
                statuses[(job_id, attempt)] = RUNNING
                continue
            if job_id not in records:
                records[job_id] = self.record(governance_scope_of_job(job_id))
            record = records[job_id]
            if record is None or attempt not in record.replay_results:
                lagging = self.store.location.read_only
                statuses[(job_id, attempt)] = UNRESOLVED if lagging else ABANDONED
        return statuses

    def _all_governance_events(self, topics: Sequence[str] = GOVERNANCE_TOPICS) -> Iterator[Any]:
        """Every governance event of the topics, verified, in the order the store recorded them."""
        start = 1
        while True:
            page = self.store.recorder.select_notifications(start, PAGE, topics=topics)
            for notification in page:
                yield self.store.verifying_store.signed_mapper.decode(
                    verify_record(self.store.keyring, notification)
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


def _halt_answer(
    snapshot_id: str, halted: bool, tenant: str | None, actor: Actor
) -> dict[str, Any]:
    """A halt set or cleared; ``tenant`` None: a store-wide halt."""
    return {"snapshot_id": snapshot_id, "halted": halted, "tenant": tenant, "by": actor.as_json()}
