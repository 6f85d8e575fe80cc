"""Replay modes (seed 000 section 2) and who may run each (section 10).

Audit and reexecute replays are for an operator, an admin or an auditor. Production replay, the
strict mode meant for disaster recovery and forensics, needs one actor holding both admin and
auditor, or a council approval of ``production_replay`` for that job (and then any actor who may
replay at all).
"""

from __future__ import annotations

from enum import StrEnum

from domain.errors import ErrorCode, InvalidInput, MaceError
from domain.governance import Actor, Role


class ReplayMode(StrEnum):
    AUDIT = "audit"
    REEXECUTE = "reexecute"
    PRODUCTION = "production"


REPLAY_ROLES = frozenset({Role.OPERATOR, Role.ADMIN, Role.AUDITOR})


def parse_mode(mode: str) -> ReplayMode:
    try:
        return ReplayMode(mode)
    except ValueError:
        msg = f"unknown replay mode {mode!r}: expected one of {[m.value for m in ReplayMode]}"
        raise InvalidInput(msg) from None


def replay_refusal(mode: ReplayMode, actor: Actor, production_approved: bool) -> str | None:
    """Why ``actor`` may not run a ``mode`` replay of a job, or None when they may."""
    holds = list(actor.roles)
    may_replay = any(actor.holds(role) for role in REPLAY_ROLES)
    if mode is ReplayMode.PRODUCTION:
        if actor.holds(Role.ADMIN) and actor.holds(Role.AUDITOR):
            return None
        if production_approved and may_replay:
            return None
        return (
            "production replay needs an actor holding admin and auditor, or a council approval"
            f" of production_replay for this job; {actor.actor_id} holds {holds}"
        )
    if may_replay:
        return None
    allowed = sorted(r.value for r in REPLAY_ROLES)
    return f"{mode.value} replay needs one of the roles {allowed}; {actor.actor_id} holds {holds}"


def check_mocks_allowed(mode: ReplayMode, has_mocks: bool) -> None:
    """Declared mocks answer agents in a reexecute sandbox only."""
    if has_mocks and mode is not ReplayMode.REEXECUTE:
        msg = "declared mocks are for reexecute replays only: audit and production use none"
        raise InvalidInput(msg)


def check_audit_roles(actor: Actor, what: str) -> None:
    """``what`` (an audit, a what-if) replays jobs in audit mode: who may replay in that mode
    may run it; anyone else is ACCESS_DENIED, before anything is read or written."""
    refusal = replay_refusal(ReplayMode.AUDIT, actor, production_approved=False)
    if refusal is not None:
        raise MaceError(ErrorCode.ACCESS_DENIED, refusal.replace("audit replay", what, 1))
