"""Governance: the signed, append-only record of who asked for what, and what the council decided.

A scope is what the decisions are about: ``job:<id>`` (force-continue requests, council votes,
every replay request and result for that job; the id scoped by its tenant, and so is the
``job_id`` of its replay events), ``tenant-snapshot:<id>`` (one tenant's halts of a snapshot and
their clears; the id scoped by the tenant as job ids are), ``snapshot:<id>`` (store-wide halts)
or ``global``.

A halt belongs to the tenant that set it: it stops that tenant's replays only, and only that
tenant's council clears it. A store-wide halt stops every tenant's replays; only an actor with the
``store_operator`` role sets one, and only a council member who also holds that role clears it.
Halts recorded before halts were scoped by tenant live in ``snapshot:<id>`` and say no tenant:
nobody knows any more whose they were, so they stay store-wide (never silently lifted).

Everything here is a human action: the wall-clock instant a person acted arrives as
``recorded_at`` (ops metadata, never a decision input), while the event's own timestamp stays on
the deterministic clock like every other MACE event.

Seed 000 section 10 and section 7: a force-continue needs an admin's request *and* a council
approval; the approval must come from someone other than the requesting admin, or one person
could approve their own exception. A halt (``FORCE_HALT_REPLAY``) stays until the council appends
its clear (``FORCE_HALT_CLEAR``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from eventsourcing.domain import event
from pydantic import BaseModel, ConfigDict

from domain.aggregate import MaceAggregate
from domain.errors import ErrorCode, InvalidInput, MaceError
from domain.naming import tenant_and_key, tenant_scoped

SCOPE_PATTERN = re.compile(
    r"^(global|job:([a-z0-9][a-z0-9._-]{0,63}\|)?[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
    r"|tenant-snapshot:([a-z0-9][a-z0-9._-]{0,63}\|)?[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
    r"|snapshot:[A-Za-z0-9][A-Za-z0-9._:-]{0,127})$"
)
ACTOR_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
MAX_REASON = 500


class Role(StrEnum):
    OPERATOR = "operator"
    ADMIN = "admin"
    AUDITOR = "auditor"
    COUNCIL = "council"
    STORE_OPERATOR = "store_operator"
    """Acts for the whole store, not one tenant: sets (and, with council, clears) store-wide
    halts. It grants nothing else."""


class Vote(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class Motion(StrEnum):
    """What the council votes on for a job."""

    FORCE_CONTINUE = "force_continue"
    PRODUCTION_REPLAY = "production_replay"


class HaltCause(StrEnum):
    INTEGRITY_FAILURE = "INTEGRITY_FAILURE"
    SECURITY_INCIDENT = "SECURITY_INCIDENT"


class GovernanceError(InvalidInput):
    """A governance command that the record does not allow."""


class AccessDenied(MaceError):
    """The actor's roles do not allow what they asked for."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.ACCESS_DENIED, message)


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts, and the roles they act in (validated, roles sorted and unique)."""

    actor_id: str
    roles: tuple[str, ...]

    @classmethod
    def of(cls, actor_id: str, roles: list[str] | tuple[str, ...]) -> Actor:
        if not ACTOR_PATTERN.fullmatch(actor_id):
            msg = (
                f"invalid actor id {actor_id!r}: expected 1-128 letters, digits and . _ @ -,"
                " starting with a letter or digit"
            )
            raise GovernanceError(msg)
        try:
            normalised = tuple(sorted({Role(r).value for r in roles}))
        except ValueError:
            msg = f"unknown role in {list(roles)}: expected some of {[r.value for r in Role]}"
            raise GovernanceError(msg) from None
        if not normalised:
            msg = f"actor {actor_id} holds no role: expected some of {[r.value for r in Role]}"
            raise GovernanceError(msg)
        return cls(actor_id, normalised)

    def holds(self, role: Role) -> bool:
        return role.value in self.roles

    def as_json(self) -> dict[str, Any]:
        return {"actor_id": self.actor_id, "roles": list(self.roles)}


def require_any(actor: Actor, roles: Iterable[Role]) -> None:
    """AccessDenied unless the actor holds at least one of ``roles``."""
    wanted = sorted(role.value for role in roles)
    if not any(actor.holds(Role(role)) for role in wanted):
        raise AccessDenied(
            f"this needs one of the roles {wanted}; {actor.actor_id} holds {list(actor.roles)}"
        )


def _reason(reason: str) -> str:
    reason = reason.strip()
    if not reason or len(reason) > MAX_REASON or len(reason.splitlines()) != 1:
        msg = f"a reason must be one line of 1-{MAX_REASON} characters"
        raise GovernanceError(msg)
    return reason


class ReplayRequestFields(BaseModel):
    """What a REPLAY_REQUEST says, whichever event carries it: `Governance.ReplayRequested` on a
    record, or `Governance.OpenedByReplay`, the request that opens a job's record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str
    attempt: int
    mode: str
    force_continue: bool
    actor_id: str
    roles: list[str]
    recorded_at: str
    lease: str | None


class Governance(MaceAggregate):
    NAME_PREFIX = "governance"
    NAME_FIELD = "scope"

    class Opened(MaceAggregate.Created):
        LOG_NAME: ClassVar[str] = "GOVERNANCE_OPENED"
        scope: str

    class VoteCast(MaceAggregate.Event):
        LOG_NAME: ClassVar[str] = "COUNCIL_VOTE"
        motion: str
        vote: str
        actor_id: str
        roles: list[str]
        recorded_at: str

    class ForceContinueRequested(MaceAggregate.Event):
        LOG_NAME: ClassVar[str] = "FORCE_CONTINUE_REQUEST"
        reason: str
        actor_id: str
        roles: list[str]
        recorded_at: str

    class HaltSet(MaceAggregate.Event):
        LOG_NAME: ClassVar[str] = "FORCE_HALT_REPLAY"
        # Version 1 was before halts were scoped by tenant: it is store-wide (tenant None).
        class_version: ClassVar[int] = 2
        snapshot_id: str
        tenant: str | None
        cause: str
        reason: str
        actor_id: str
        roles: list[str]
        recorded_at: str

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["tenant"] = None

    class HaltCleared(MaceAggregate.Event):
        LOG_NAME: ClassVar[str] = "FORCE_HALT_CLEAR"
        # Version 1 was before halts were scoped by tenant: it is store-wide (tenant None).
        class_version: ClassVar[int] = 2
        snapshot_id: str
        tenant: str | None
        actor_id: str
        roles: list[str]
        recorded_at: str

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["tenant"] = None

    class ReplayRequested(ReplayRequestFields, MaceAggregate.Event):
        LOG_NAME: ClassVar[str] = "REPLAY_REQUEST"
        # Version 1 named no lease.
        class_version: ClassVar[int] = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["lease"] = None

    class OpenedByReplay(ReplayRequestFields, Opened):
        """A job's record opened by its first REPLAY_REQUEST: the request is the record's first
        event (attempt 1), so a first replay stores no event a later one does not."""

        LOG_NAME: ClassVar[str] = "REPLAY_REQUEST"
        class_version: ClassVar[int] = 1

        def apply(self, aggregate: Any) -> None:
            aggregate.note_replay_request(self.attempt, self.lease)

    class ReplayResulted(MaceAggregate.Event):
        """Version 3: ``ok`` means the replay reproduced the job. Before, it meant only that no
        error stopped the replay, so it was true for one that re-executed nothing."""

        LOG_NAME: ClassVar[str] = "REPLAY_RESULT"
        # Version 1 did not time the replay; version 2's ok did not mean reproduced.
        class_version: ClassVar[int] = 3
        job_id: str
        attempt: int
        ok: bool
        error_code: str | None
        authoritative: bool
        divergences: int
        report_digest: str
        recorded_at: str
        elapsed_ms: int | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["elapsed_ms"] = None

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            # Read, never rewritten: since the first replay, one that re-ran no iteration (so
            # reproduced nothing) has been non-authoritative. An old ok and authoritative result
            # reproduced its job; an old ok one that was not authoritative (a mock answered, a
            # fact was taken as recorded, or nothing was re-executed) does not show that it did.
            state["ok"] = bool(state["ok"] and state["authoritative"])

    @classmethod
    def open(cls, scope: str) -> Governance:
        return cls(scope=_checked_scope(scope))

    @property
    def halt_tenant(self) -> str | None:
        """Whose halts this record holds: a tenant's, or (None) the store-wide ones."""
        kind, _, name = self.scope.partition(":")
        return tenant_and_key(name)[0] if kind == TENANT_SNAPSHOT else None

    @event(Opened)
    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.votes: dict[str, list[tuple[str, str]]] = {}
        self.force_requested_by: str | None = None
        self.halted: dict[str, str] = {}
        self.replay_attempts = 0
        self.replay_results: set[int] = set()
        self.replay_leases: dict[int, str | None] = {}

    # Council votes and force-continue

    def cast_vote(self, motion: str, vote: str, actor: Actor, recorded_at: str) -> None:
        self._require(actor, Role.COUNCIL, "vote")
        motion = self._motion(motion)
        if (
            motion == Motion.FORCE_CONTINUE
            and vote == Vote.APPROVE
            and actor.actor_id == self.force_requested_by
        ):
            msg = (
                f"{actor.actor_id} requested this force-continue: the council approval must come"
                " from someone else"
            )
            raise GovernanceError(msg)
        self._vote_cast(
            motion=motion.value,
            vote=Vote(vote).value,
            actor_id=actor.actor_id,
            roles=list(actor.roles),
            recorded_at=recorded_at,
        )

    @event(VoteCast)
    def _vote_cast(
        self, motion: str, vote: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        self.votes.setdefault(motion, []).append((actor_id, vote))

    def request_force_continue(self, reason: str, actor: Actor, recorded_at: str) -> None:
        self._require(actor, Role.ADMIN, "request a force-continue")
        _require_job_scope(self.scope, "a force-continue")
        self._force_continue_requested(
            reason=_reason(reason),
            actor_id=actor.actor_id,
            roles=list(actor.roles),
            recorded_at=recorded_at,
        )

    @event(ForceContinueRequested)
    def _force_continue_requested(
        self, reason: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        self.force_requested_by = actor_id

    def approved(self, motion: Motion) -> bool:
        """The council's latest vote on the motion approves it (a later reject withdraws it)."""
        votes = self.votes.get(motion.value, [])
        return bool(votes) and votes[-1][1] == Vote.APPROVE.value

    def force_continue_allowed(self) -> bool:
        """An admin requested a force-continue and another person, for the council, approved."""
        if self.force_requested_by is None or not self.approved(Motion.FORCE_CONTINUE):
            return False
        approver = self.votes[Motion.FORCE_CONTINUE.value][-1][0]
        return approver != self.force_requested_by

    # Halts

    def halt(
        self, snapshot_id: str, cause: HaltCause, reason: str, actor: Actor, recorded_at: str
    ) -> None:
        """Set FORCE_HALT_REPLAY on a snapshot for this record's tenant (or the whole store); a
        snapshot already halted here stays as it is."""
        reason = _reason(reason)
        if self.scope != governance_scope_of_snapshot(snapshot_id, self.halt_tenant):
            msg = f"a halt of snapshot {snapshot_id} belongs to its own scope, not {self.scope}"
            raise GovernanceError(msg)
        if self.halt_tenant is None:
            self._require(actor, Role.STORE_OPERATOR, "halt a snapshot for every tenant")
        if snapshot_id in self.halted:
            return
        self._halt_set(
            snapshot_id=snapshot_id,
            tenant=self.halt_tenant,
            cause=HaltCause(cause).value,
            reason=reason,
            actor_id=actor.actor_id,
            roles=list(actor.roles),
            recorded_at=recorded_at,
        )

    @event(HaltSet)
    def _halt_set(
        self,
        snapshot_id: str,
        tenant: str | None,
        cause: str,
        reason: str,
        actor_id: str,
        roles: list[str],
        recorded_at: str,
    ) -> None:
        self.halted[snapshot_id] = f"{cause}: {reason}"

    def clear_halt(self, snapshot_id: str, actor: Actor, recorded_at: str) -> None:
        self._require(actor, Role.COUNCIL, "clear a halt")
        if self.halt_tenant is None:
            self._require(actor, Role.STORE_OPERATOR, "clear a store-wide halt")
        if snapshot_id not in self.halted:
            msg = f"snapshot {snapshot_id} is not halted in scope {self.scope}"
            raise GovernanceError(msg)
        self._halt_cleared(
            snapshot_id=snapshot_id,
            tenant=self.halt_tenant,
            actor_id=actor.actor_id,
            roles=list(actor.roles),
            recorded_at=recorded_at,
        )

    @event(HaltCleared)
    def _halt_cleared(
        self,
        snapshot_id: str,
        tenant: str | None,
        actor_id: str,
        roles: list[str],
        recorded_at: str,
    ) -> None:
        del self.halted[snapshot_id]

    # Replay attempts

    def request_replay(
        self,
        mode: str,
        force_continue: bool,
        actor: Actor,
        recorded_at: str,
        lease: str | None = None,
    ) -> int:
        """Append REPLAY_REQUEST; returns the attempt's number (from 1, per job).

        ``lease``: names the lock the replaying process holds until the attempt's result is
        stored (ops metadata): a request without a result whose lease nobody holds was abandoned.
        """
        _require_job_scope(self.scope, "a replay")
        attempt = self.replay_attempts + 1
        self._replay_requested(
            **_replay_request(self.scope, attempt, mode, force_continue, actor, recorded_at, lease)
        )
        return attempt

    @event(ReplayRequested)
    def _replay_requested(
        self,
        job_id: str,
        attempt: int,
        mode: str,
        force_continue: bool,
        actor_id: str,
        roles: list[str],
        recorded_at: str,
        lease: str | None,
    ) -> None:
        self.note_replay_request(attempt, lease)

    def note_replay_request(self, attempt: int, lease: str | None) -> None:
        """Apply a REPLAY_REQUEST of either kind (it records nothing itself)."""
        self.replay_attempts = attempt
        self.replay_leases[attempt] = lease

    def record_replay_result(
        self,
        attempt: int,
        ok: bool,
        error_code: str | None,
        authoritative: bool,
        divergences: int,
        report_digest: str,
        recorded_at: str,
        elapsed_ms: int | None = None,
    ) -> None:
        """Append REPLAY_RESULT for an attempt this record requested.

        ``ok``: the replay reproduced the job (no error, and a recorded fact re-executed and
        matched). ``elapsed_ms``: how long the replay ran, by a monotonic clock (ops metadata).
        """
        if not 1 <= attempt <= self.replay_attempts:
            msg = f"replay attempt {attempt} was never requested in scope {self.scope}"
            raise GovernanceError(msg)
        if attempt in self.replay_results:
            msg = f"replay attempt {attempt} already has its result in scope {self.scope}"
            raise GovernanceError(msg)
        self._replay_resulted(
            job_id=self.scope.removeprefix("job:"),
            attempt=attempt,
            ok=ok,
            error_code=error_code,
            authoritative=authoritative,
            divergences=divergences,
            report_digest=report_digest,
            recorded_at=recorded_at,
            elapsed_ms=elapsed_ms,
        )

    @event(ReplayResulted)
    def _replay_resulted(
        self,
        job_id: str,
        attempt: int,
        ok: bool,
        error_code: str | None,
        authoritative: bool,
        divergences: int,
        report_digest: str,
        recorded_at: str,
        elapsed_ms: int | None,
    ) -> None:
        self.replay_results.add(attempt)

    # Checks

    @staticmethod
    def _motion(motion: str) -> Motion:
        try:
            return Motion(motion)
        except ValueError:
            msg = f"unknown motion {motion!r}: expected one of {[m.value for m in Motion]}"
            raise GovernanceError(msg) from None

    @staticmethod
    def _require(actor: Actor, role: Role, action: str) -> None:
        if not actor.holds(role):
            held = list(actor.roles)
            raise AccessDenied(
                f"only the {role.value} role may {action}; {actor.actor_id} holds {held}"
            )


def _checked_scope(scope: str) -> str:
    if not SCOPE_PATTERN.fullmatch(scope):
        msg = (
            f"invalid governance scope {scope!r}: expected global, job:<id>, snapshot:<id> or"
            " tenant-snapshot:<id>"
        )
        raise GovernanceError(msg)
    return scope


def _require_job_scope(scope: str, what: str) -> None:
    if not scope.startswith("job:"):
        msg = f"{what} belongs to a job's governance, not to scope {scope}"
        raise GovernanceError(msg)


def _replay_request(
    scope: str,
    attempt: int,
    mode: str,
    force_continue: bool,
    actor: Actor,
    recorded_at: str,
    lease: str | None,
) -> dict[str, Any]:
    """The fields of a REPLAY_REQUEST (`ReplayRequestFields`) for attempt ``attempt``."""
    return {
        "job_id": scope.removeprefix("job:"),
        "attempt": attempt,
        "mode": mode,
        "force_continue": force_continue,
        "actor_id": actor.actor_id,
        "roles": list(actor.roles),
        "recorded_at": recorded_at,
        "lease": lease,
    }


def replay_requested(
    record: Governance | None,
    scope: str,
    mode: str,
    force_continue: bool,
    actor: Actor,
    recorded_at: str,
    lease: str | None = None,
) -> Governance:
    """The job's record with the next attempt's REPLAY_REQUEST (`Governance.request_replay`
    says what it holds): appended to ``record``, or, when the job has none yet (None), the
    record opened by it, attempt 1, in one event (`Governance.OpenedByReplay`). The attempt's
    number is the record's ``replay_attempts``."""
    if record is not None:
        record.request_replay(mode, force_continue, actor, recorded_at, lease)
        return record
    _require_job_scope(_checked_scope(scope), "a replay")
    request = _replay_request(scope, 1, mode, force_continue, actor, recorded_at, lease)
    return Governance._create(Governance.OpenedByReplay, scope=scope, **request)


def governance_scope_of_job(scoped_id: str) -> str:
    """The scope of a job, named by its id scoped by its tenant (`Job.scoped_id`)."""
    return f"job:{scoped_id}"


TENANT_SNAPSHOT = "tenant-snapshot"
"""The kind of scope that holds one tenant's halts of a snapshot."""


def governance_scope_of_snapshot(snapshot_id: str, tenant: str | None) -> str:
    """Where a tenant's halts of a snapshot are recorded; ``tenant=None``: store-wide halts.

    The store-wide record keeps the name every halt had before halts were scoped by tenant. A
    tenant's (the default tenant's too) is another kind of scope, with the snapshot id scoped by
    the tenant as job ids are, so that no tenant's halt is ever a store-wide one.
    """
    if tenant is None:
        return f"snapshot:{snapshot_id}"
    return f"{TENANT_SNAPSHOT}:{tenant_scoped(tenant, snapshot_id)}"


def seen_by_tenant(scope: str, tenant: str) -> bool:
    """Whether a governance record of ``scope`` is one the tenant sees: one of its jobs', one of
    its halts of a snapshot, or a store-wide halt (it stops the tenant's replays too)."""
    kind, _, name = scope.partition(":")
    if kind == "snapshot":
        return True
    return kind in {"job", TENANT_SNAPSHOT} and tenant_and_key(name)[0] == tenant


def halt_scopes(snapshot_id: str, tenant: str) -> tuple[str, str]:
    """The scopes whose halts stop the tenant's replays touching a snapshot: its own, then the
    store-wide one. No other tenant's."""
    return (
        governance_scope_of_snapshot(snapshot_id, tenant),
        governance_scope_of_snapshot(snapshot_id, None),
    )
