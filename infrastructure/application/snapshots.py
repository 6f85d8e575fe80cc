"""Snapshot use cases: store a declared snapshot, read one back (its content address checked),
and choose the snapshots a Stage-0 job runs under (those named, the defaults for the rest)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from typing import Any

from eventsourcing.persistence import IntegrityError, RecordConflictError
from pydantic import ValidationError

from domain.errors import IntegrityFailure, NotFoundError, SnapshotError
from domain.snapshot import Snapshot, SnapshotKind, check_snapshot_id
from domain.stage0.config import DEFAULT_CONFIGS, parse_config
from domain.validation_messages import first_problem
from infrastructure.storage.store import LedgerStore
from projections.stage0_runtime import Stage0Snapshots

PARSED_KEPT = 64
"""Sets of parsed Stage-0 snapshots a process keeps (`SnapshotService.stage0`), and parsed
configurations of single snapshots (`SnapshotService.config`)."""


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
        self._verified: dict[str, Snapshot] = {}  # `held`: read, verified and content-checked
        self._parsed: dict[tuple[str, ...], Stage0Snapshots] = {}  # `stage0`, by snapshot ids
        self._configs: dict[str, Any] = {}  # `config`, by snapshot id (None: unusable)

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
        snapshot = self.store.repository.get_one(
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
        """Those of ``snapshot_ids`` the ledger holds (`held`)."""
        return set(self.held(snapshot_ids))

    def held(self, snapshot_ids: Collection[str]) -> dict[str, Snapshot]:
        """Those of ``snapshot_ids`` the ledger holds, by id, each verified as `get` verifies
        it; those not verified before are read together (a job names five: one query).

        A snapshot's stream is written once, by its content address, and never appended to: one
        verified stored stays so, and is not read again for every job that runs under it. One
        deleted later is tampering that `verify` and every replay of the jobs naming it find
        (``MISSING_SNAPSHOT``). Callers read the snapshots returned, never change them.
        """
        for snapshot_id in snapshot_ids:
            check_snapshot_id(snapshot_id)
        unread = [sid for sid in dict.fromkeys(snapshot_ids) if sid not in self._verified]
        if unread:
            streams = [Snapshot.id_for(sid) for sid in unread]
            read = self.store.repository.read(streams)
            for stream in streams:
                snapshot = self.store.repository.aggregate(Snapshot, stream, read[stream])
                if snapshot is not None:
                    checked = content_checked(snapshot)
                    self._verified.setdefault(checked.snapshot_id, checked)
        return {sid: self._verified[sid] for sid in snapshot_ids if sid in self._verified}

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
        return ids, self._parsed_once(ids, payloads, overrides), unstored

    def _parsed_once(
        self,
        ids: dict[str, str],
        payloads: dict[SnapshotKind, dict[str, Any]],
        named: Collection[str],
    ) -> Stage0Snapshots:
        """The snapshots parsed, once a process for the same ids: an id is the digest of its
        payload (content-addressed, checked when read), so the same ids parse the same, and a
        router's rules are held to the backtracking checks on every parse. Those ``named`` by
        the caller are each checked usable first, to say which one is not. Callers read the
        parsed snapshots, never change them."""
        key = tuple(ids[kind.value] for kind in SnapshotKind)
        parsed = self._parsed.get(key)
        if parsed is None:
            for kind in SnapshotKind:
                if kind.value in named:
                    usable(kind, ids[kind.value], payloads[kind])
            if len(self._parsed) >= PARSED_KEPT:
                self._parsed.clear()  # a process that meets ever new snapshots keeps a few
            parsed = self._parsed[key] = Stage0Snapshots.parse(payloads)
        return parsed

    def config(self, kind: SnapshotKind, snapshot: Snapshot | None) -> Any:
        """The parsed configuration a held snapshot (`held`) of ``kind`` holds, if it is one and
        usable, else None; parsed once a process, as `stage0`'s are: its id is the digest of its
        content, so the same id parses the same. Callers read it, never change it."""
        if snapshot is None or snapshot.kind != kind.value:
            return None
        snapshot_id = snapshot.snapshot_id
        if snapshot_id not in self._configs:
            try:
                parsed = parse_config(kind, snapshot.payload)
            except ValueError:
                parsed = None
            if len(self._configs) >= PARSED_KEPT:
                self._configs.clear()  # a process that meets ever new snapshots keeps a few
            self._configs[snapshot_id] = parsed
        return self._configs[snapshot_id]

    def named(self, kind: SnapshotKind, snapshot_id: str) -> Snapshot:
        """A stored snapshot a caller named for ``kind``: present and of that kind (whether a
        job can run under it: `usable`)."""
        try:
            snapshot = self.get(snapshot_id)
        except NotFoundError:
            raise SnapshotError(f"no {kind.value} snapshot {snapshot_id} in the ledger") from None
        except ValueError as exc:
            raise SnapshotError(f"{kind.value} snapshot: {exc}") from None
        if snapshot.kind != kind.value:
            msg = f"snapshot {snapshot_id} is a {snapshot.kind} snapshot, not {kind.value}"
            raise SnapshotError(msg)
        return snapshot


def usable(kind: SnapshotKind, snapshot_id: str, payload: dict[str, Any]) -> None:
    """Refuse a snapshot named for ``kind`` that a job could not run under, naming the field."""
    try:
        parse_config(kind, payload)
    except ValidationError as exc:
        problem = first_problem(exc)
        msg = f"{kind.value} snapshot {snapshot_id} cannot be used: {problem}"
        raise SnapshotError(msg) from None
