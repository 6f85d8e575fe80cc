"""Snapshots: the declared, content-addressed configuration a job runs under.

A snapshot is identified by what it says, not by when it was stored:
``snapshot_id = sha256(config_hash + ":" + schema_version + ":" + seed_namespace)`` with
``config_hash`` the SHA-256 of the payload's canonical JSON (seed 000 section 5). Declaring the
same snapshot twice therefore names the same aggregate, and the generator that made the id is
recorded beside it so a replay can check the id's provenance.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import canonical_copy, digest
from domain.determinism import ID_GENERATORS, snapshot_id
from domain.errors import InvalidInput

NAMESPACE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_./-]{0,63}$")
SNAPSHOT_ID_PATTERN = re.compile(r"^[0-9a-f]{64}$")


def check_snapshot_id(snapshot_id: str) -> str:
    if not SNAPSHOT_ID_PATTERN.fullmatch(snapshot_id):
        msg = f"invalid snapshot id {snapshot_id!r}: expected 64 lowercase hex characters"
        raise InvalidInput(msg)
    return snapshot_id


class SnapshotKind(StrEnum):
    """The five snapshots a job declares (seed 000 section 1)."""

    SELFREP = "selfrep"
    BRAINSTATE = "brainstate"
    ROUTER = "router"
    PRIVACY = "privacy"
    GOVERNANCE = "governance"


def parse_kind(kind: str) -> SnapshotKind:
    try:
        return SnapshotKind(kind)
    except ValueError:
        expected = ", ".join(k.value for k in SnapshotKind)
        msg = f"unknown snapshot kind {kind!r}: expected one of {expected}"
        raise InvalidInput(msg) from None


def default_namespace(kind: SnapshotKind) -> str:
    return f"mace/{kind.value}"


class Snapshot(MaceAggregate):
    NAME_PREFIX = "snapshot"
    NAME_FIELD = "snapshot_id"

    @classmethod
    def declare(
        cls,
        kind: str,
        payload: dict[str, Any],
        schema_version: int = 1,
        seed_namespace: str | None = None,
    ) -> Snapshot:
        snapshot_kind = parse_kind(kind)
        if not isinstance(payload, dict):
            msg = f"snapshot payload must be a JSON object, got {type(payload).__name__}"
            raise InvalidInput(msg)
        if isinstance(schema_version, bool) or not isinstance(schema_version, int):
            msg = "schema_version must be a positive integer"
            raise InvalidInput(msg)
        if schema_version < 1:
            msg = "schema_version must be a positive integer"
            raise InvalidInput(msg)
        namespace = seed_namespace or default_namespace(snapshot_kind)
        if not NAMESPACE_PATTERN.fullmatch(namespace):
            msg = f"invalid seed namespace {namespace!r}: expected [a-z0-9_./-], at most 64"
            raise InvalidInput(msg)
        payload = canonical_copy(payload)
        config_hash = digest(payload)
        new_id = snapshot_id(config_hash, schema_version, namespace)
        return cls(
            snapshot_id=new_id,
            kind=snapshot_kind.value,
            schema_version=schema_version,
            payload=payload,
            config_hash=config_hash,
            seed_namespace=namespace,
            generator={
                "snapshot_id": ID_GENERATORS["snapshot_id"],
                "config_hash": "sha256(canonical_json(payload))",
                "seed_namespace": namespace,
            },
        )

    @event("Declared")
    def __init__(
        self,
        snapshot_id: str,
        kind: str,
        schema_version: int,
        payload: dict[str, Any],
        config_hash: str,
        seed_namespace: str,
        generator: dict[str, str],
    ) -> None:
        self.snapshot_id = snapshot_id
        self.kind = kind
        self.schema_version = schema_version
        self.payload = payload
        self.config_hash = config_hash
        self.seed_namespace = seed_namespace
        self.generator = generator

    def as_json(self) -> dict[str, Any]:
        """The snapshot as the CLI and the HTTP API show it."""
        return {
            "snapshot_id": self.snapshot_id,
            "kind": self.kind,
            "schema_version": self.schema_version,
            "seed_namespace": self.seed_namespace,
            "config_hash": self.config_hash,
            "generator": self.generator,
            "payload": self.payload,
        }
