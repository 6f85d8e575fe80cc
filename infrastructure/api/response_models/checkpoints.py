"""Checkpoint answers: a signed checkpoint in the export format, the public key that checks it,
a consistency proof between two, and the verdict on the whole ledger."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domain.checkpoint import Checkpoint
from domain.errors import ErrorCode
from infrastructure.api.response_models import ResponseModel


class ExportedCheckpoint(ResponseModel):
    """A checkpoint in the export format (`mace checkpoint export`): keep it elsewhere."""

    algorithm: Literal["ed25519"]
    key_id: str
    checkpoint: Checkpoint = Field(description="the signed body")
    signature: str = Field(
        description="base64 Ed25519 signature of the checkpoint's canonical JSON"
    )


class CheckpointPublicKey(ResponseModel):
    key_id: str
    public_key: str = Field(description="the Ed25519 public key, PEM")


class CheckpointVerifierKey(ResponseModel):
    origin: str = Field(description="the checkpoint notes' origin line and key name")
    vkey: str = Field(description="<origin>+<key id>+<base64 key>, c2sp.org/signed-note")


class CheckpointSummary(ResponseModel):
    """Which checkpoint: its number, tree size and root (`Checkpoint.summary`)."""

    number: int
    tree_size: int
    root: str


class ConsistencyProof(ResponseModel):
    """RFC 9162 consistency proof from ``old`` to ``new``, checked against both signed roots."""

    ok: bool = Field(description="whether the proof holds for both roots")
    old: CheckpointSummary
    new: CheckpointSummary
    proof: list[str] = Field(description="the proof's hashes, hex, in order")


class LedgerVerdict(ResponseModel):
    """What `mace verify --all --json` says: ok with its counts, or the failure's code and
    message (then no count)."""

    ok: bool
    error_code: ErrorCode | None
    message: str | None = Field(default=None, description="present when not ok")
    events: int | None = Field(default=None, description="present when ok, as every count")
    streams: int | None = None
    jobs: int | None = None
    sealed_jobs: int | None = None
    checkpoints: int | None = None
    checkpointed: int | None = None
    not_yet_checkpointed: int | None = None
    extends: CheckpointSummary | None = Field(
        default=None, description="present when a witness was sent: the checkpoint it names"
    )
