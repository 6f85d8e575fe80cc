"""Snapshot answers: one stored (or found stored already), and one read back."""

from __future__ import annotations

from pydantic import Field, JsonValue

from domain.snapshot import SnapshotKind
from infrastructure.api.response_models import ResponseModel


class SnapshotStored(ResponseModel):
    snapshot_id: str
    kind: SnapshotKind
    created: bool = Field(description="false: the same snapshot was stored already")


class IdGenerator(ResponseModel):
    """How the snapshot's id was made, so that a replay can check its provenance."""

    snapshot_id: str
    config_hash: str
    seed_namespace: str


class SnapshotShown(ResponseModel):
    """A stored snapshot, its signature and content address verified."""

    snapshot_id: str
    kind: SnapshotKind
    schema_version: int
    seed_namespace: str
    config_hash: str
    generator: IdGenerator
    payload: dict[str, JsonValue]
