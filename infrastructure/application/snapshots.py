"""Snapshot use cases: store a declared snapshot, read one back (its content address checked),
and choose the snapshots a Stage-0 job runs under (those named, the defaults for the rest)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from typing import Any

from eventsourcing.persistence import IntegrityError, RecordConflictError
from pydantic import ValidationError

from domain.snapshot import Snapshot, SnapshotKind, check_snapshot_id
from domain.stage0.config import DEFAULT_CONFIGS, parse_config
from domain.validation_messages import first_problem
from infrastructure.storage.errors import NotFoundError, SnapshotError
from infrastructure.storage.signed_record import IntegrityFailure
from infrastructure.storage.store import LedgerStore
from projections.stage0_runtime import Stage0Snapshots


def default_snapshots() -> dict[SnapshotKind, Snapshot]:
    """The Stage-0 default snapshots, declared (not stored): fresh aggregates on every call."""
    return {
        kind: Snapshot.declare(kind.value, config.model_dump())
        for kind, config in DEFAULT_CONFIGS.items()
    }


@dataclass(frozen=True)
class Declared:
    snapshot_id: str
    payload: dict[str, Any]


@cache
def default_declarations() -> dict[SnapshotKind, Declared]:
    """The ids and payloads of `default_snapshots`, declared once a process: every job that
    runs under a default needs them, and declaring is a canonical encoding and a digest. The
    payloads are shared: read them, never change them."""
    return {kind: Declared(s.snapshot_id, s.payload) for kind, s in default_snapshots().items()}


def content_checked(snapshot: Snapshot) -> Snapshot:
    """The stored snapshot, once its id still follows from what it says (content-addressed)."""
    again = Snapshot.declare(
        snapshot.kind, snapshot.payload, snapshot.schema_version, snapshot.seed_namespace
    )
    if (again.snapshot_id, again.config_hash) != (snapshot.snapshot_id, snapshot.config_hash):
        raise IntegrityFailure(snapshot.id, 1, "snapshot id does not match its content")
    return snapshot


class SnapshotService:
    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    def put(self, snapshot: Snapshot) -> tuple[Snapshot, bool]:
        """Store a declared snapshot; an identical one already stored is returned, not re-stored.

        Returns the stored snapshot and whether this call created it.
        """
        try:
            return self.get(snapshot.snapshot_id), False
        except NotFoundError:
            pass
        try:
            self.store.save(snapshot)
        except (IntegrityError, RecordConflictError):
            # Someone stored the same content between our read and write: same id, same bytes.
            return self.get(snapshot.snapshot_id), False
        return snapshot, True

    def get(self, snapshot_id: str) -> Snapshot:
        check_snapshot_id(snapshot_id)
        snapshot = self.store.get_aggregate(
            Snapshot, Snapshot.id_for(snapshot_id), f"snapshot {snapshot_id}"
        )
        return content_checked(snapshot)

    def stored(self, snapshot_id: str) -> Snapshot | None:
        """The stored snapshot of this id, or None when the ledger does not hold it."""
        try:
            return self.get(snapshot_id)
        except NotFoundError:
            return None

    def is_stored(self, snapshot_id: str) -> bool:
        return self.stored(snapshot_id) is not None

    def stored_ids(self, snapshot_ids: Collection[str]) -> set[str]:
        """Those of ``snapshot_ids`` the ledger holds, read together and each verified as `get`
        verifies it (a job names five: one query instead of five)."""
        for snapshot_id in snapshot_ids:
            check_snapshot_id(snapshot_id)
        streams = list(dict.fromkeys(map(Snapshot.id_for, snapshot_ids)))
        read = self.store.read_streams(streams)
        held: set[str] = set()
        for stream in streams:
            snapshot = self.store.aggregate_from(Snapshot, stream, read[stream])
            if snapshot is not None:
                held.add(content_checked(snapshot).snapshot_id)
        return held

    def default_ids(self) -> dict[str, str]:
        """Store the Stage-0 default snapshots (once) and return their ids by kind."""
        ids: dict[str, str] = {}
        for kind, snapshot in default_snapshots().items():
            stored, _ = self.put(snapshot)
            ids[kind.value] = stored.snapshot_id
        return ids

    def stage0(self, overrides: dict[str, str]) -> tuple[dict[str, str], Stage0Snapshots, set[str]]:
        """The snapshots a Stage-0 job runs under: those named, the defaults for the rest.

        Returns their ids by kind, the parsed snapshots, and the ids of defaults not stored yet
        (stored with the first job that uses them, so that refused input writes nothing).
        """
        ids: dict[str, str] = {}
        payloads: dict[SnapshotKind, dict[str, Any]] = {}
        defaults: set[str] = set()
        for kind in SnapshotKind:
            if kind.value not in overrides:
                default = default_declarations()[kind]
                ids[kind.value] = default.snapshot_id
                payloads[kind] = default.payload
                defaults.add(default.snapshot_id)
                continue
            snapshot = self.named(kind, overrides[kind.value])
            ids[kind.value] = snapshot.snapshot_id
            payloads[kind] = snapshot.payload
        unstored = defaults - self.stored_ids(defaults) if defaults else set()
        return ids, Stage0Snapshots.parse(payloads), unstored

    def named(self, kind: SnapshotKind, snapshot_id: str) -> Snapshot:
        """A stored snapshot a caller named for ``kind``: present, of that kind, usable."""
        try:
            snapshot = self.get(snapshot_id)
        except NotFoundError:
            raise SnapshotError(f"no {kind.value} snapshot {snapshot_id} in the ledger") from None
        except ValueError as exc:
            raise SnapshotError(f"{kind.value} snapshot: {exc}") from None
        if snapshot.kind != kind.value:
            msg = f"snapshot {snapshot_id} is a {snapshot.kind} snapshot, not {kind.value}"
            raise SnapshotError(msg)
        try:
            parse_config(kind, snapshot.payload)
        except ValidationError as exc:
            problem = first_problem(exc)
            msg = f"{kind.value} snapshot {snapshot_id} cannot be used: {problem}"
            raise SnapshotError(msg) from None
        return snapshot
