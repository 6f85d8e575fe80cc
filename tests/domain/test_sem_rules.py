"""Seed 004 section 2, rules S1-S9, and F2: canonical SEM keys and what SEM reads and writes.

A key is ``<scope>/<entity_type>/<entity_id>/<attribute>`` over ``[a-z0-9_/]`` (S1, S2) with a
snake_case type and attribute (S3); synonyms map to one key (S4); a write overwrites (S5, S8);
a value is a small stable fact, never null (S6); a read answers exactly ``exists``, ``value``
and ``last_updated`` (S7); a miss says so and invents nothing (S9); the latest ``last_updated``
wins (F2).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from support.stage0_support import InMemorySem, fact, seed_004_text

from domain.canonical import canonical_json
from domain.determinism import DeterministicClock
from domain.events import RunEvent, SemRead
from domain.job import DEFAULT_TENANT
from domain.sem import (
    KEY_PATTERN,
    MAX_VALUE_BYTES,
    MISS,
    SemEntry,
    SemKeyError,
    SemRecord,
    SemValueError,
    SemVocabulary,
    canonical_key,
    validate_key,
    validate_value,
)
from domain.stage0.config import DEFAULT_BRAINSTATE, DEFAULT_PRIVACY
from projections.stage0_runtime import RecordingMemory

VOCABULARY = DEFAULT_BRAINSTATE.sem
SNAKE = st.from_regex(r"[a-z][a-z0-9]{0,5}(?:_[a-z0-9]{1,5}){0,2}", fullmatch=True)
SEGMENT = st.from_regex(r"[a-z0-9_]{1,12}", fullmatch=True)
KEYS = st.builds(lambda *parts: "/".join(parts), SEGMENT, SNAKE, SEGMENT, SNAKE)


def _key_error(key: str) -> SemKeyError:
    with pytest.raises(SemKeyError) as caught:
        validate_key(key)
    return caught.value


# S1 - Structure


def test_S1_regex_is_the_seed_regex_verbatim() -> None:
    assert KEY_PATTERN.pattern == r"^[a-z0-9_\/]+$"
    assert "Regex: `^[a-z0-9_\\/]+$`" in seed_004_text()


def test_S1_key_has_four_parts_in_order() -> None:
    assert validate_key("user/person/alice/favorite_color") == (
        "user",
        "person",
        "alice",
        "favorite_color",
    )


@pytest.mark.parametrize(
    "key",
    [
        "",
        "user/person/alice",
        "user/person/alice/name/extra",
        "user//alice/name",
        "/person/alice/name",
        "user/person/alice/",
        "user_person_alice_name",
    ],
)
def test_S1_key_needs_four_non_empty_parts(key: str) -> None:
    error = _key_error(key)
    assert error.rule == "S1"
    assert error.key == key
    assert "rule S1" in str(error)


# S2 - Allowed character set


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("user/person/Alice/name", "A"),
        ("User/person/alice/name", "U"),
        ("user/person/alice smith/name", " "),
        ("user/person/alice-smith/name", "-"),
        ("user/person/alice.smith/name", "."),
        ("user/person/zo\u00eb/name", "\u00eb"),
        ("user/person/\uff41lice/name", "\uff41"),  # fullwidth a
        ("user/person/\u0663/name", "\u0663"),  # Arabic-Indic digit three
        ("user/person/alice/name\n", "\n"),
    ],
    ids=["caps_id", "caps_scope", "space", "dash", "dot", "latin1", "fullwidth", "digit", "nl"],
)
def test_S2_forbidden_character_names_the_rule_in_one_line(key: str, bad: str) -> None:
    error = _key_error(key)
    assert error.rule == "S2"
    assert str(error) == (
        f"invalid SEM key {key!r}: rule S2: only a-z, 0-9, _ and / are allowed, found {bad!r}"
    )
    assert "\n" not in str(error)


def test_S2_is_checked_before_structure() -> None:
    # Three parts and a capital: the character set is what the key breaks first.
    assert _key_error("user/Person/alice").rule == "S2"


@given(KEYS)
def test_S2_every_well_formed_key_matches_the_seed_regex(key: str) -> None:
    assert KEY_PATTERN.fullmatch(key)
    assert validate_key(key) == tuple(key.split("/"))


# S3 - Entity & attribute naming


@pytest.mark.parametrize(
    "key",
    [
        "user/_person/alice/name",
        "user/person_/alice/name",
        "user/1person/alice/name",
        "user/per__son/alice/name",
        "user/person/alice/_name",
        "user/person/alice/name_",
        "user/person/alice/favorite__color",
        "user/person/alice/2fa",
    ],
)
def test_S3_entity_type_and_attribute_are_snake_case(key: str) -> None:
    error = _key_error(key)
    assert error.rule == "S3"
    assert "rule S3" in str(error)
    assert "must be snake_case" in str(error)


@pytest.mark.parametrize("key", ["user_1/person/007/name", "42/person/_x_/name2", "a/b/c/d"])
def test_S3_scope_and_entity_id_only_need_the_character_set(key: str) -> None:
    assert "/".join(validate_key(key)) == key


# S4 - Synonym handling


@pytest.mark.parametrize(
    "spelling",
    [
        "user/person/alice/favorite_color",
        "user/person/alice/favourite_color",
        "user/person/alice/favourite_colour",
        "user/person/alice/favorite_colour",
        "user/people/alice/favourite_colour",
    ],
)
def test_S4_synonyms_map_to_one_canonical_key(spelling: str) -> None:
    assert canonical_key(spelling, VOCABULARY) == "user/person/alice/favorite_color"


def test_S4_each_key_part_has_its_own_synonym_table() -> None:
    assert (
        canonical_key("world/countries/uk/capital_city", VOCABULARY)
        == "world/country/united_kingdom/capital"
    )
    # "uk" is an entity_id synonym only: as an attribute it stays as written.
    assert canonical_key("world/country/france/uk", VOCABULARY) == "world/country/france/uk"


@given(KEYS)
def test_S4_canonical_key_is_idempotent(key: str) -> None:
    once = canonical_key(key, VOCABULARY)
    assert canonical_key(once, VOCABULARY) == once


def test_S4_canonical_key_still_checks_the_raw_key() -> None:
    with pytest.raises(SemKeyError) as caught:
        canonical_key("user/person/alice/Favourite_Colour", VOCABULARY)
    assert caught.value.rule == "S2"


@pytest.mark.parametrize(
    ("vocabulary", "message"),
    [
        (
            {"synonyms": {"attribute": {"colour": "color", "hue": "colour"}}},
            "synonym 'hue' -> 'colour' maps to another synonym (attribute)",
        ),
        (
            {"synonyms": {"attribute": {"colour": "Color"}}},
            "synonyms.attribute['colour']: 'Color' is not a valid attribute",
        ),
        (
            {"synonyms": {"entity_type": {"people": "per_son_"}}},
            "synonyms.entity_type['people']: 'per_son_' is not a valid entity_type",
        ),
        (
            {"synonyms": {"entity_id": {"uk": "united-kingdom"}}},
            "synonyms.entity_id['uk']: 'united-kingdom' is not a valid entity_id",
        ),
        (
            {"synonyms": {"species": {"cat": "felis"}}},
            "synonyms for unknown key part(s) ['species']",
        ),
        (
            {"entity_types": {"france": "Country"}},
            "entity_types['france']: 'Country' is not a valid entity_type",
        ),
    ],
    ids=["chain", "bad_attribute", "bad_type", "bad_id", "unknown_part", "bad_entity_type"],
)
def test_S4_vocabulary_refuses_chains_and_invalid_targets(
    vocabulary: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match="1 validation error") as caught:
        SemVocabulary.model_validate(vocabulary)
    assert message in str(caught.value)


# S5 / S8 - Versioning and overwrite policy


def test_S5_S8_a_second_write_overwrites() -> None:
    entry = SemEntry.first_write(
        DEFAULT_TENANT, "user/person/alice/favorite_color", "blue", source="job:a"
    )
    entry.write("green", source="job:b")
    assert entry.read().value == "green"
    assert entry.source == "job:b"
    assert entry.version == 2
    events = entry.collect_events()
    assert [type(e).__name__ for e in events] == ["Stored", "Overwritten"]
    assert [e.value for e in events] == ["blue", "green"]  # type: ignore[attr-defined]


def test_S5_a_write_stores_the_canonical_copy() -> None:
    entry = SemEntry.first_write(
        DEFAULT_TENANT, "world/number/pi/value", (3.14159265358979, "pi"), "t"
    )
    assert entry.read().value == [3.141592654, "pi"]


def test_S5_first_write_checks_the_key() -> None:
    with pytest.raises(SemKeyError) as caught:
        SemEntry.first_write(DEFAULT_TENANT, "user/person/alice", "blue", source="t")
    assert caught.value.rule == "S1"


# S6 - Stable-ish facts only


def test_S6_value_size_limit_is_on_canonical_bytes() -> None:
    largest = "x" * (MAX_VALUE_BYTES - 2)  # plus its two quotes
    assert len(canonical_json(largest)) == MAX_VALUE_BYTES
    assert validate_value(largest) == largest
    with pytest.raises(SemValueError) as caught:
        validate_value(largest + "x")
    assert str(caught.value) == (
        f"a SEM value holds stable facts (S6): {MAX_VALUE_BYTES + 1} bytes exceeds 4096"
    )


def test_S6_null_is_refused() -> None:
    with pytest.raises(SemValueError) as caught:
        validate_value(None)
    assert str(caught.value) == (
        "a SEM value must not be null: a missing fact is a miss (S9), not a stored null"
    )


def test_S6_a_refused_write_leaves_the_entry_unchanged() -> None:
    entry = fact("user/person/alice/bio", "short")
    for refused in (None, "x" * MAX_VALUE_BYTES):
        with pytest.raises(SemValueError):
            entry.write(refused, source="t")
    assert entry.version == 1
    assert entry.read().value == "short"


def test_S6_null_inside_a_value_is_kept() -> None:
    assert validate_value({"middle_name": None}) == {"middle_name": None}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2**64], ids=["nan", "inf", "big"])
def test_S6_a_value_without_canonical_encoding_is_a_sem_value_error(value: Any) -> None:
    with pytest.raises(SemValueError):
        validate_value(value)


# S7 - Read contract


def test_S7_read_contract_has_exactly_three_fields() -> None:
    key = "user/person/alice/favorite_color"
    record = fact(key, "blue").read()
    assert record.as_json() == {
        "exists": True,
        "value": "blue",
        "last_updated": DeterministicClock(f"sem:{key}").iso(1),
    }
    assert set(record.as_json()) == {"exists", "value", "last_updated"}
    assert canonical_json(record.as_json()).startswith(b'{"exists":true,"last_updated":"')


def test_S7_last_updated_is_an_iso8601_utc_timestamp() -> None:
    last_updated = fact("user/person/alice/favorite_color", "blue").read().last_updated
    assert last_updated is not None
    assert last_updated.endswith("Z")
    assert len(last_updated) == len("2024-10-29T01:47:00.562668Z")


# S9 - No inference on miss


def test_S9_miss_has_exists_false_and_no_value() -> None:
    assert SemRecord(exists=False) == MISS
    assert MISS.as_json() == {"exists": False, "value": None, "last_updated": None}


def test_S9_reading_an_absent_key_is_a_miss_and_is_recorded() -> None:
    events: list[RunEvent] = []
    memory = RecordingMemory(InMemorySem(), VOCABULARY, DEFAULT_PRIVACY, events.append, 0, "t")
    assert memory.read("world/country/atlantis/capital") is MISS
    assert events == [
        SemRead(iteration=0, key="world/country/atlantis/capital", exists=False),
    ]


# F2 - Conflict in SEM: latest last_updated wins


def _stamp(entry: SemEntry) -> str:
    last_updated = entry.read().last_updated
    assert last_updated is not None
    return last_updated


@given(st.lists(st.text(max_size=20), min_size=2, max_size=8))
def test_F2_latest_last_updated_wins(values: list[str]) -> None:
    key = "user/person/alice/nickname"
    clock = DeterministicClock(f"sem:{key}")
    entry = SemEntry.first_write(DEFAULT_TENANT, key, values[0], source="t")
    stamps = [_stamp(entry)]
    for value in values[1:]:
        entry.write(value, source="t")
        stamps.append(_stamp(entry))
    assert stamps == [clock.iso(version) for version in range(1, len(values) + 1)]
    assert all(earlier < later for earlier, later in itertools.pairwise(stamps))
    assert entry.read().value == values[-1]  # the write with the latest timestamp


def test_F2_timestamps_depend_on_the_key_and_write_order_only() -> None:
    key = "world/country/france/capital"
    here, there = fact(key, "Lyon", "Paris"), fact(key, "Nice", "Paris")
    assert here.read() == there.read()
    other = fact("world/country/japan/capital", "Kyoto", "Tokyo")
    assert other.read().last_updated != here.read().last_updated
