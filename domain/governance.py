"""Governance: the signed, append-only record of council decisions over a scope.

A scope is what the decisions are about (``job:<id>``, ``snapshot:<id>`` or ``global``). Votes,
halts and clears are human actions: the wall-clock instant a person acted arrives as
``recorded_at`` (ops metadata, never a decision input), while the event's own timestamp stays on
the deterministic clock like every other MACE event.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate

SCOPE_PATTERN = re.compile(r"^(global|(job|snapshot):[A-Za-z0-9][A-Za-z0-9._:-]{0,127})$")
ACTOR_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


class Role(StrEnum):
    OPERATOR = "operator"
    ADMIN = "admin"
    AUDITOR = "auditor"
    COUNCIL = "council"


class Vote(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class GovernanceError(ValueError):
    """A governance command that the record does not allow."""


def _council_member(actor_id: str, roles: list[str], action: str) -> tuple[str, list[str]]:
    actor, actor_roles = _actor(actor_id, roles)
    if Role.COUNCIL.value not in actor_roles:
        msg = f"only the council may {action}; {actor} does not hold the council role"
        raise GovernanceError(msg)
    return actor, actor_roles


def _actor(actor_id: str, roles: list[str]) -> tuple[str, list[str]]:
    if not ACTOR_PATTERN.fullmatch(actor_id):
        msg = f"invalid actor id {actor_id!r}"
        raise GovernanceError(msg)
    try:
        normalised = sorted({Role(r).value for r in roles})
    except ValueError:
        msg = f"unknown role in {roles}: expected {[r.value for r in Role]}"
        raise GovernanceError(msg) from None
    return actor_id, normalised


class Governance(MaceAggregate):
    NAME_PREFIX = "governance"
    NAME_FIELD = "scope"

    @classmethod
    def open(cls, scope: str) -> Governance:
        if not SCOPE_PATTERN.fullmatch(scope):
            msg = f"invalid governance scope {scope!r}: expected global, job:<id> or snapshot:<id>"
            raise GovernanceError(msg)
        return cls(scope=scope)

    @event("Opened")
    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.votes: list[dict[str, Any]] = []
        self.halted: dict[str, str] = {}

    def cast_vote(
        self, motion: str, vote: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        actor, actor_roles = _council_member(actor_id, roles, "vote")
        self._vote_cast(
            motion=motion,
            vote=Vote(vote).value,
            actor_id=actor,
            roles=actor_roles,
            recorded_at=recorded_at,
        )

    @event("VoteCast")
    def _vote_cast(
        self, motion: str, vote: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        self.votes.append({"motion": motion, "vote": vote, "actor_id": actor_id})

    def halt(
        self, snapshot_id: str, reason: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        actor, actor_roles = _actor(actor_id, roles)
        if snapshot_id in self.halted:
            return
        self._halt_set(
            snapshot_id=snapshot_id,
            reason=reason,
            actor_id=actor,
            roles=actor_roles,
            recorded_at=recorded_at,
        )

    @event("HaltSet")
    def _halt_set(
        self, snapshot_id: str, reason: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        self.halted[snapshot_id] = reason

    def clear_halt(
        self, snapshot_id: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        actor, actor_roles = _council_member(actor_id, roles, "clear a halt")
        if snapshot_id not in self.halted:
            msg = f"snapshot {snapshot_id} is not halted in scope {self.scope}"
            raise GovernanceError(msg)
        self._halt_cleared(
            snapshot_id=snapshot_id, actor_id=actor, roles=actor_roles, recorded_at=recorded_at
        )

    @event("HaltCleared")
    def _halt_cleared(
        self, snapshot_id: str, actor_id: str, roles: list[str], recorded_at: str
    ) -> None:
        del self.halted[snapshot_id]
