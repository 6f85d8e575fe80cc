"""Semantic memory (SEM): the Stage-0 rules S1-S9 and F2, and the aggregate that holds one fact.

A fact lives under a canonical key ``<scope>/<entity_type>/<entity_id>/<attribute>`` (S1, S2).
The type and the attribute are snake_case (S3); synonyms from the vocabulary a job declares map
to one key (S4); a write replaces the value (S5, S8); a read answers ``exists``, ``value`` and
``last_updated`` (S7) and never invents a value for a missing key (S9).

Each key of each tenant is its own aggregate, its key scoped by its tenant (`tenant_scoped`):
``sem:<key>`` for the default tenant (every entry stored before SEM was scoped by tenant is the
default tenant's, unchanged), ``sem:<tenant>|<key>`` for another (S1 allows no ``|`` in a key, so
it is never the default tenant's). Its clock is seeded by that name: the n-th write to a key is
stamped ``DeterministicClock("sem:<name>").at(n)``. Timestamps of one key are
therefore strictly increasing in write order, the same in every store that saw the same writes,
and "latest ``last_updated`` wins" (F2) and "last validated write wins" (S8) name the same write.
Two writers racing on one key conflict in the event log; the one that retries writes after the
other, with a later timestamp, so a conflict always resolves to the latest ``last_updated``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from eventsourcing.domain import event
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from domain.aggregate import MaceAggregate
from domain.canonical import CanonicalJSONError, canonical_copy, canonical_json
from domain.determinism import iso_text
from domain.errors import InvalidInput
from domain.naming import DEFAULT_TENANT, tenant_scoped

KEY_PATTERN: Final = re.compile(r"^[a-z0-9_\/]+$")
"""Rule S1's regex, verbatim."""

SNAKE_CASE: Final = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
SEGMENT: Final = re.compile(r"^[a-z0-9_]+$")
KEY_PARTS: Final = ("scope", "entity_type", "entity_id", "attribute")
MAX_VALUE_BYTES: Final = 4096
"""S6: SEM keeps stable-ish facts, not chat logs; a value's canonical JSON stays small."""


class SemKeyError(InvalidInput):
    """A key that breaks one of S1-S3; ``rule`` names which."""

    def __init__(self, key: str, rule: str, reason: str) -> None:
        super().__init__(f"invalid SEM key {key!r}: rule {rule}: {reason}")
        self.key = key
        self.rule = rule


class SemValueError(InvalidInput):
    """A value SEM does not store (rule S6 or the canonical serializer)."""


class SemVocabulary(BaseModel):
    """Synonym tables per key part (S4), declared in the BrainState snapshot.

    ``synonyms["attribute"] = {"favourite_colour": "favorite_color"}`` makes both spellings one
    key. ``entity_types`` names the type of a world entity a question mentions, so that "what is
    the capital of france" reads ``world/country/france/capital``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    synonyms: dict[str, dict[str, str]] = Field(default_factory=dict)
    entity_types: dict[str, str] = Field(default_factory=dict)

    def model_post_init(self, _context: Any) -> None:
        unknown = sorted(set(self.synonyms) - set(KEY_PARTS))
        if unknown:
            msg = f"synonyms for unknown key part(s) {unknown}: expected {list(KEY_PARTS)}"
            raise InvalidInput(msg)
        for part, table in self.synonyms.items():
            for alias, target in table.items():
                _check_segment(f"synonyms.{part}[{alias!r}]", part, target)
                if target in table:
                    msg = f"synonym {alias!r} -> {target!r} maps to another synonym ({part})"
                    raise InvalidInput(msg)
        for entity, entity_type in self.entity_types.items():
            _check_segment(f"entity_types[{entity!r}]", "entity_type", entity_type)

    def entity_type_of(self, entity_id: str, default: str = "entity") -> str:
        return self.entity_types.get(entity_id, default)


def _check_segment(where: str, part: str, value: str) -> None:
    pattern = SNAKE_CASE if part in {"entity_type", "attribute"} else SEGMENT
    if not pattern.fullmatch(value):
        msg = f"{where}: {value!r} is not a valid {part}"
        raise InvalidInput(msg)


def validate_key(key: str) -> tuple[str, str, str, str]:
    """Check S2, then S1's structure, then S3; return the four parts."""
    if not isinstance(key, str) or not key:
        raise SemKeyError(str(key), "S1", "a key is a non-empty string")
    if not KEY_PATTERN.fullmatch(key):
        bad = next(c for c in key if not KEY_PATTERN.fullmatch(c))
        reason = f"only a-z, 0-9, _ and / are allowed, found {bad!r}"
        raise SemKeyError(key, "S2", reason)
    parts = key.split("/")
    if len(parts) != len(KEY_PARTS) or not all(parts):
        reason = "expected <scope>/<entity_type>/<entity_id>/<attribute>, four non-empty parts"
        raise SemKeyError(key, "S1", reason)
    for name, value in zip(KEY_PARTS, parts, strict=True):
        if name in {"entity_type", "attribute"} and not SNAKE_CASE.fullmatch(value):
            reason = f"{name} {value!r} must be snake_case (a letter, then words joined by _)"
            raise SemKeyError(key, "S3", reason)
    return parts[0], parts[1], parts[2], parts[3]


def canonical_key(key: str, vocabulary: SemVocabulary) -> str:
    """Validate ``key`` (S1-S3) and map each part through its synonym table (S4)."""
    parts = validate_key(key)
    mapped = [
        vocabulary.synonyms.get(name, {}).get(value, value)
        for name, value in zip(KEY_PARTS, parts, strict=True)
    ]
    return "/".join(mapped)


def validate_value(value: Any) -> Any:
    """The canonical copy of a value SEM may store, or SemValueError saying why not."""
    if value is None:
        msg = "a SEM value must not be null: a missing fact is a miss (S9), not a stored null"
        raise SemValueError(msg)
    try:
        size = len(canonical_json(value))
    except CanonicalJSONError as exc:
        raise SemValueError(f"a SEM value must have a canonical JSON encoding: {exc}") from None
    if size > MAX_VALUE_BYTES:
        msg = f"a SEM value holds stable facts (S6): {size} bytes exceeds {MAX_VALUE_BYTES}"
        raise SemValueError(msg)
    return canonical_copy(value)


@dataclass(frozen=True, slots=True)
class SemRecord:
    """The S7 read contract."""

    exists: bool
    value: Any = None
    last_updated: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"exists": self.exists, "value": self.value, "last_updated": self.last_updated}


MISS: Final = SemRecord(exists=False)
"""S9: a miss says so and carries no value."""


class SemEntry(MaceAggregate):
    """One canonical key's current value in one tenant; every write is an event with its source."""

    NAME_PREFIX = "sem"
    NAME_FIELD = "key"

    class Stored(MaceAggregate.Created):
        key: str
        value: Any
        source: str
        tenant: str = DEFAULT_TENANT

        @model_serializer(mode="wrap")
        def _default_tenant_unwritten(self, handler: SerializerFunctionWrapHandler) -> Any:
            # Entries stored before SEM was scoped by tenant carry no tenant: they are the
            # default tenant's, and its new entries stay byte for byte what they were.
            data = handler(self)
            if data.get("tenant") == DEFAULT_TENANT:
                del data["tenant"]
            return data

    class Overwritten(MaceAggregate.Event):
        value: Any
        source: str

    @classmethod
    def name_of(cls, fields: Mapping[str, Any]) -> str:
        return tenant_scoped(fields.get("tenant", DEFAULT_TENANT), fields["key"])

    @classmethod
    def first_write(cls, tenant: str, key: str, value: Any, source: str) -> SemEntry:
        validate_key(key)
        return cls(key=key, value=validate_value(value), source=source, tenant=tenant)

    @event(Stored)
    def __init__(self, key: str, value: Any, source: str, tenant: str) -> None:
        self.key = key
        self.value = value
        self.source = source
        self.tenant = tenant

    def write(self, value: Any, source: str) -> None:
        """S5/S8: a validated write replaces the current value."""
        self._overwritten(value=validate_value(value), source=source)

    @event(Overwritten)
    def _overwritten(self, value: Any, source: str) -> None:
        self.value = value
        self.source = source

    def read(self) -> SemRecord:
        return SemRecord(exists=True, value=self.value, last_updated=iso_text(self.modified_on))
