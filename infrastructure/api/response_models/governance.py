"""Governance answers: who acted, the actions' acknowledgements and a job's governance log."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from domain.governance import HaltCause, Motion, ReplayRequestFields, Role, Vote
from infrastructure.api.response_models import ResponseModel


class ActorShown(ResponseModel):
    """The acting identity, always the token's: its id and its roles, sorted."""

    actor_id: str
    roles: list[Role]


class ForceContinueAsked(ResponseModel):
    job_id: str
    requested: Literal["force_continue"]
    by: ActorShown


class VoteCast(ResponseModel):
    job_id: str
    motion: Motion
    vote: Vote
    by: ActorShown


class HaltChanged(ResponseModel):
    """A halt set (``halted`` true) or cleared; ``tenant`` null: a store-wide halt."""

    snapshot_id: str
    halted: bool
    tenant: str | None
    by: ActorShown


class _Entry(ResponseModel):
    """What every governance log entry has: the record's scope and the event's version in it."""

    scope: str = Field(description="job:<job_id>, or the snapshot halt scope the entry is of")
    version: int


class _Acted(_Entry):
    actor_id: str
    roles: list[Role]
    recorded_at: str = Field(description="when, by the ops clock: never a decision input")


class GovernanceOpened(_Entry):
    event: Literal["GOVERNANCE_OPENED"]


class CouncilVoteEntry(_Acted):
    event: Literal["COUNCIL_VOTE"]
    motion: Motion
    vote: Vote


class ForceContinueEntry(_Acted):
    event: Literal["FORCE_CONTINUE_REQUEST"]
    reason: str


class HaltEntry(_Acted):
    event: Literal["FORCE_HALT_REPLAY"]
    snapshot_id: str
    tenant: str | None
    cause: HaltCause
    reason: str


class HaltClearEntry(_Acted):
    event: Literal["FORCE_HALT_CLEAR"]
    snapshot_id: str
    tenant: str | None


class ReplayRequestEntry(_Entry, ReplayRequestFields):
    event: Literal["REPLAY_REQUEST"]
    result: Literal["recorded", "running", "abandoned", "unresolved"] = Field(
        description="recorded: its REPLAY_RESULT is in the log; running or abandoned: not yet,"
        " by whether its lease is held; unresolved: on a read store that cannot tell"
    )


class ReplayResultEntry(_Entry):
    event: Literal["REPLAY_RESULT"]
    job_id: str
    attempt: int
    ok: bool
    error_code: str | None
    authoritative: bool
    divergences: int
    report_digest: str
    recorded_at: str
    elapsed_ms: int | None = Field(
        description="null for results recorded before replays were timed"
    )


GovernanceEntry = Annotated[
    GovernanceOpened
    | CouncilVoteEntry
    | ForceContinueEntry
    | HaltEntry
    | HaltClearEntry
    | ReplayRequestEntry
    | ReplayResultEntry,
    Field(discriminator="event"),
]


class GovernanceLog(ResponseModel):
    """A job's governance events and those of the halts that stop its replays, in stored order."""

    job_id: str
    events: list[GovernanceEntry]
