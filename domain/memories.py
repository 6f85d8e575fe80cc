"""A tenant's memories: SEM facts and episodes on one event-sourced log, with labels and provenance.

Each tenant has one stream, ``memories:<tenant>``. Its version is the *memory log position*: a
receipt records the position it saw, and the log loaded at that version is the memory exactly as
it stood then (seed 001's replay, one step further). Memories are never edited: a fact written
again under the same SEM key supersedes the live one (S5, S8) and gets a new id, and forgetting
leaves a tombstone, so the history of what an agent could have seen is complete.

A memory's id is ``mem-``/``epi-`` and 32 hex digits of ``derive_id(tenant, "memory", kind,
position)`` (seed 004 D3): the same writes in the same order give the same ids in any store.

At every ``SNAPSHOT_INTERVAL``-th position a `MemorySnapshot` records the live memories: a log is
loaded from the newest snapshot at or below the position wanted and the (fewer than that many)
events after it, so a write or a context no longer reads the whole log. A snapshot is an event
like any other: signed, verified, counted by checkpoints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Self

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import canonical_copy
from domain.determinism import derive_id
from domain.errors import InvalidInput
from domain.policy import MemoryKind
from domain.sem import validate_key, validate_value
from domain.sensitive_data import refuse_sensitive
from domain.stage0.config import DEFAULT_PRIVACY, PrivacyPolicy

LABEL_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9._:-]{0,63}$")
MAX_LABELS: Final = 16
MAX_EPISODE_CHARS: Final = 4096
MAX_REASON_CHARS: Final = 500
SNAPSHOT_INTERVAL: Final = 100
"""Positions between two snapshots of a tenant's memory log."""
ID_PREFIX: Final = {MemoryKind.FACT: "mem-", MemoryKind.EPISODE: "epi-"}
TENANT_PRIVACY: Final[PrivacyPolicy] = DEFAULT_PRIVACY
"""The privacy rule over tenant facts: the Stage-0 default privacy snapshot's denied attributes.

A tenant's memories are written outside any job, so no job's privacy snapshot covers them; they
are held to the default one, the same list ``mace sem put`` applies unless told otherwise. Every
field of a write (a fact's value, an episode's text, labels, the origin) is also held to
`domain.sensitive_data`'s key names and value patterns, as a run's events are.
"""


class MemoryLogError(InvalidInput):
    """A write the memory log refuses; the message names what was wrong."""


class UnknownMemory(LookupError):
    """No live memory has this id in the tenant's log."""


class InconsistentLog(Exception):
    """A stored event supersedes or forgets a memory the log does not hold live: no ledger
    wrote that log (or the snapshot it was read from) so; the message names the memory."""


@dataclass(frozen=True, slots=True)
class Memory:
    """One live memory. ``content`` is a fact's value or an episode's text."""

    memory_id: str
    kind: MemoryKind
    key: str | None
    content: Any
    labels: tuple[str, ...]
    provenance: dict[str, Any]
    position: int

    def as_json(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "kind": self.kind.value,
            "key": self.key,
            "content": self.content,
            "labels": list(self.labels),
            "provenance": self.provenance,
            "position": self.position,
        }

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> Memory:
        """The memory `as_json` wrote (a snapshot's)."""
        return cls(
            stored["memory_id"],
            MemoryKind(stored["kind"]),
            stored["key"],
            stored["content"],
            tuple(stored["labels"]),
            stored["provenance"],
            stored["position"],
        )


def check_fact_key(key: str) -> str:
    """A SEM key (S1-S3) whose attribute the privacy rule lets memory keep, or a ValueError."""
    validate_key(key)
    TENANT_PRIVACY.check_storable(key)
    return key


def check_labels(labels: list[str]) -> list[str]:
    """Labels sorted and without repeats, or MemoryLogError naming the bad one."""
    if len(set(labels)) > MAX_LABELS:
        msg = f"labels: at most {MAX_LABELS} labels, got {len(set(labels))}"
        raise MemoryLogError(msg)
    for label in labels:
        if not isinstance(label, str) or not LABEL_PATTERN.fullmatch(label):
            msg = (
                f"label {label!r}: expected 1-64 of lowercase letters, digits and . _ : -,"
                " starting with a letter or digit"
            )
            raise MemoryLogError(msg)
    return sorted(set(labels))


def check_episode(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise MemoryLogError("episode: expected non-empty text")
    if len(text) > MAX_EPISODE_CHARS:
        msg = f"episode: {len(text)} characters exceeds {MAX_EPISODE_CHARS}"
        raise MemoryLogError(msg)
    return text


def check_reason(reason: str) -> str:
    if not reason.strip() or len(reason) > MAX_REASON_CHARS or not reason.isprintable():
        msg = f"reason: expected 1-{MAX_REASON_CHARS} printable characters on one line"
        raise MemoryLogError(msg)
    return reason


class MemoryLog(MaceAggregate):
    """Every memory write of one tenant, in order; the state is the live memories."""

    NAME_PREFIX = "memories"
    NAME_FIELD = "tenant"

    class Opened(MaceAggregate.Created):
        tenant: str

    class Remembered(MaceAggregate.Event):
        memory_id: str
        kind: MemoryKind
        key: str | None
        content: Any
        labels: list[str]
        provenance: dict[str, Any]
        supersedes: str | None

    class Forgotten(MaceAggregate.Event):
        memory_id: str
        reason: str
        provenance: dict[str, Any]

    @event(Opened)
    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self._live: dict[str, Memory] = {}

    @classmethod
    def restored(cls, snapshot: MemorySnapshot) -> Self:
        """The log as it stood at the snapshot's position, made from the snapshot alone: the
        events after it are then applied as to any loaded aggregate."""
        log = object.__new__(cls)
        # The state eventsourcing's BaseAggregate keeps, as folding the log's events sets it.
        log._id = cls.id_for(snapshot.tenant)
        log._version = snapshot.log_version
        log._created_on = snapshot.log_created_on
        log._modified_on = snapshot.log_modified_on
        log._pending_events = []
        log.tenant = snapshot.tenant
        log._live = {m.memory_id: m for m in map(Memory.from_json, snapshot.live)}
        return log

    def remember_fact(
        self, key: str, value: Any, labels: list[str], provenance: dict[str, Any]
    ) -> Memory:
        """Store a fact under a SEM key (S1-S3, S6, privacy); a live fact under it is superseded."""
        check_fact_key(key)
        content, sorted_labels = validate_value(value), check_labels(labels)
        written = {"key": key, "value": content, "labels": sorted_labels, "provenance": provenance}
        refuse_sensitive(written, TENANT_PRIVACY.deny_sem_attributes)
        current = next((m for m in self._live.values() if m.key == key), None)
        self._remembered(
            memory_id=self._next_id(MemoryKind.FACT),
            kind=MemoryKind.FACT,
            key=key,
            content=content,
            labels=sorted_labels,
            provenance=canonical_copy(provenance),
            supersedes=None if current is None else current.memory_id,
        )
        return self.latest

    def remember_episode(self, text: str, labels: list[str], provenance: dict[str, Any]) -> Memory:
        content, sorted_labels = check_episode(text), check_labels(labels)
        written = {"text": content, "labels": sorted_labels, "provenance": provenance}
        refuse_sensitive(written, TENANT_PRIVACY.deny_sem_attributes)
        self._remembered(
            memory_id=self._next_id(MemoryKind.EPISODE),
            kind=MemoryKind.EPISODE,
            key=None,
            content=content,
            labels=sorted_labels,
            provenance=canonical_copy(provenance),
            supersedes=None,
        )
        return self.latest

    def forget(self, memory_id: str, reason: str, provenance: dict[str, Any]) -> None:
        """Tombstone a live memory; receipts that saw it still name it."""
        if memory_id not in self._live:
            raise UnknownMemory(memory_id)
        self._forgotten(
            memory_id=memory_id, reason=check_reason(reason), provenance=canonical_copy(provenance)
        )

    def live(self) -> list[Memory]:
        """The live memories in the order they were written."""
        return sorted(self._live.values(), key=lambda m: m.position)

    @property
    def latest(self) -> Memory:
        return max(self._live.values(), key=lambda m: m.position)

    def _next_id(self, kind: MemoryKind) -> str:
        return ID_PREFIX[kind] + derive_id(self.tenant, "memory", kind.value, self.version + 1)[:32]

    @event(Remembered)
    def _remembered(
        self,
        memory_id: str,
        kind: MemoryKind,
        key: str | None,
        content: Any,
        labels: list[str],
        provenance: dict[str, Any],
        supersedes: str | None,
    ) -> None:
        if supersedes is not None:
            self._drop(supersedes)
        self._live[memory_id] = Memory(
            # apply() runs before the version moves on: this event's position is the next one
            memory_id,
            MemoryKind(kind),
            key,
            content,
            tuple(labels),
            provenance,
            self.version + 1,
        )

    @event(Forgotten)
    def _forgotten(self, memory_id: str, reason: str, provenance: dict[str, Any]) -> None:
        self._drop(memory_id)

    def _drop(self, memory_id: str) -> None:
        if self._live.pop(memory_id, None) is None:
            raise InconsistentLog(f"position {self.version + 1} drops {memory_id}, not live there")


class MemorySnapshot(MaceAggregate):
    """A tenant's live memories at log position ``log_version``, a multiple of
    `SNAPSHOT_INTERVAL`: one event in a stream of its own, named by tenant and position, so a
    reader finds it without an index and no two writers ever append to the same one."""

    NAME_PREFIX = "memory-snapshot"
    NAME_FIELD = "name"

    class Taken(MaceAggregate.Created):
        name: str
        tenant: str
        log_version: int
        log_created_on: datetime
        log_modified_on: datetime
        live: list[dict[str, Any]]

    @staticmethod
    def name_at(tenant: str, log_version: int) -> str:
        return f"{tenant}@{log_version}"

    @classmethod
    def of(cls, log: MemoryLog) -> MemorySnapshot:
        if log.version % SNAPSHOT_INTERVAL:
            msg = f"memory logs are snapshotted at multiples of {SNAPSHOT_INTERVAL}: {log.version}"
            raise MemoryLogError(msg)
        return cls(
            name=cls.name_at(log.tenant, log.version),
            tenant=log.tenant,
            log_version=log.version,
            log_created_on=log.created_on,
            log_modified_on=log.modified_on,
            live=[memory.as_json() for memory in log.live()],
        )

    @event(Taken)
    def __init__(
        self,
        name: str,
        tenant: str,
        log_version: int,
        log_created_on: datetime,
        log_modified_on: datetime,
        live: list[dict[str, Any]],
    ) -> None:
        self.name = name
        self.tenant = tenant
        self.log_version = log_version
        self.log_created_on = log_created_on
        self.log_modified_on = log_modified_on
        self.live = live
