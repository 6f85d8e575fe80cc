"""Operations answers: health, readiness, and who read personal data in full."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infrastructure.api.response_models import ResponseModel
from infrastructure.api.response_models.governance import ActorShown

KeyState = Literal["verified", "unrecorded", "mismatch"]
"""A configured key id checked against the store (the store's `KeyStatus`): its check record
verifies under our secret, there is none yet, or the store was signed with another secret."""


class Healthy(ResponseModel):
    status: Literal["ok"]


class ReadStoreState(ResponseModel):
    store: str = Field(description="MACE_READ_STORE's address, without its password")
    log_position: int = Field(description="how far it has caught up")


class Ready(ResponseModel):
    """Ready. The other fields are answered to an admin token only: what the service runs on."""

    status: Literal["ready"]
    store: str | None = Field(default=None, description="the store's address, without password")
    active_key_id: str | None = Field(default=None, description="null: no signing key loaded")
    tokens: int | None = Field(default=None, description="how many tokens the service holds")
    log_position: int | None = Field(default=None, description="the global log position")
    keys: dict[str, KeyState] | None = Field(
        default=None, description="each configured key id, checked against the store"
    )
    read_store: ReadStoreState | None = Field(
        default=None, description="when MACE_READ_STORE is set"
    )


class PersonalDataRead(ResponseModel):
    """One recorded read of a job's personal data in full."""

    version: int
    actor: ActorShown
    job_id: str
    versions: list[int] = Field(description="the versions of the job's events read in full")
    channel: Literal["http", "cli"]
    accessed_at: str


class PersonalDataReads(ResponseModel):
    reads: list[PersonalDataRead]
