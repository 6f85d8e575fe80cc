"""Personal data in SEM values and memories written outside any run, on SQLite and PostgreSQL.

The attack: a SEM value ``{"password": "hunter2"}``, an SSN, a card number and an ``sk-`` API key
(`support.canaries`), put with ``ledger.sem.put``/``mace sem put`` and remembered as a memory
(a fact's value, an episode's text, a label, an origin) through the Python API, ``mace memories
add`` and ``POST /v1/memories``; then read back as a non-admin (``mace sem get``, ``mace memories
list``, ``GET /v1/memories``) and searched for every canary. Each write is refused the way a run
is (`domain.sensitive_data`: by key name and by value pattern): one line naming the field path,
never the value, ``INVALID_INPUT`` (exit 2 / 422), nothing written. Ordinary facts still go in.
Values stored before the rules are shown to a non-admin as ``[REDACTED:pii]``, to an admin in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error
from support.canaries import API_KEY, CARD, PASSWORD, SSN, TEXT, found
from support.ledger_fixtures import RawTable, run, store_of
from support.older_stores import BEFORE_THE_RULES, OLD_SECRET, store_before_the_rules

from domain.errors import InvalidInput
from domain.governance import Actor, Role
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from projections.redaction import PII_MARK

KEY = "user/person/alice/note"
ATTACKS: list[tuple[str, Any, str]] = [
    (KEY, {"password": PASSWORD}, "value.password holds a value kept under 'password'"),
    (KEY, SSN, "value holds what looks like a US social security number"),
    (KEY, {"cards": [CARD]}, "value.cards[0] holds what looks like a payment card number"),
    (KEY, f"my key is {API_KEY}", "value holds what looks like an API key"),
    ("user/person/alice/api_key", OLD_SECRET, "value holds a value kept under 'api_key'"),
]
"""A SEM key, a value with personal data, and the start of the refusal's path and reason."""
ORDINARY: list[tuple[str, Any]] = [
    ("user/person/alice/city", "Paris"),
    ("user/person/alice/age", 41),
    ("user/person/alice/phone", "0044 20 7946 0951"),  # 14 digits failing Luhn: no card
    ("user/person/alice/nickname", "Ali"),
    ("user/person/alice/token_count", 2),  # a count, not a token
]
ACTOR = Actor.of("olga", [Role.OPERATOR])


def assert_clean_refusal(message: str, expected: str) -> None:
    assert expected in message, message
    assert "\n" not in message.rstrip("\n")
    assert found(message) == {}, f"the refusal quotes a canary: {message}"
    assert OLD_SECRET not in message


WRITES: dict[str, Callable[[Ledger, str, Any], object]] = {
    "sem.put": lambda ledger, key, value: ledger.sem.put(key, value, tenant="acme"),
    "memories.remember_fact": lambda ledger, key, value: ledger.memories.remember_fact(
        "acme", key, value, [], ACTOR, None
    ),
}
"""The Python API's ways to keep a value under a SEM key outside any run."""


@pytest.mark.parametrize("way", WRITES)
@pytest.mark.parametrize(("key", "value", "expected"), ATTACKS)
def test_a_sem_put_or_memory_fact_with_personal_data_is_refused_and_nothing_written(
    ledger: Ledger, way: str, key: str, value: Any, expected: str
) -> None:
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(InvalidInput) as refused:
        WRITES[way](ledger, key, value)
    assert_clean_refusal(str(refused.value), expected)
    assert store_of(ledger).recorder.max_notification_id() == before


def test_memory_episodes_labels_and_origins_are_held_to_the_same_rules(ledger: Ledger) -> None:
    before = store_of(ledger).recorder.max_notification_id()
    attempts: list[tuple[Callable[[], object], str]] = [
        (lambda: ledger.memories.remember_episode("acme", TEXT, [], ACTOR, None), "text holds"),
        (
            lambda: ledger.memories.remember_episode("acme", "met", [SSN], ACTOR, None),
            "labels[0] holds what looks like a US social security number",
        ),
        (
            lambda: ledger.memories.remember_fact(
                "acme", KEY, "ok", [], ACTOR, {"ticket": {"secret": "x1"}}
            ),
            "provenance.origin.ticket.secret holds a value kept under 'secret'",
        ),
    ]
    for attempt, expected in attempts:
        with pytest.raises(InvalidInput) as refused:
            attempt()
        assert_clean_refusal(str(refused.value), expected)
    assert store_of(ledger).recorder.max_notification_id() == before


def test_ordinary_facts_still_go_in(ledger: Ledger) -> None:
    for key, value in ORDINARY:
        assert ledger.sem.put(key, value, tenant="acme")[1].value == value
        assert ledger.memories.remember_fact("acme", key, value, [], ACTOR, None).content == value
    episode = ledger.memories.remember_episode("acme", "alice moved to Paris", [], ACTOR, None)
    assert episode.content == "alice moved to Paris"


def test_values_stored_before_the_rules_are_redacted_for_a_non_admin_cli_reader(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(cli_env) as ledger:  # closed checkpointed, as every CLI write leaves it
        store_before_the_rules(ledger, "acme")
    before = RawTable(cli_env).every_byte()
    for roles in (None, "operator,auditor"):
        if roles is not None:
            monkeypatch.setenv("MACE_ACTOR", "olga")
            monkeypatch.setenv("MACE_ROLES", roles)
        seen = ""
        for key, _ in BEFORE_THE_RULES:
            for extra in ((), ("--json",)):
                code, out, err = run(capsys, "sem", "get", key, "--tenant", "acme", *extra)
                assert code == 0, err
                assert PII_MARK in out
                seen += out + err
        for extra in ((), ("--json",)):
            code, out, err = run(capsys, "memories", "list", "--tenant", "acme", *extra)
            assert code == 0, err
            seen += out + err
        assert found(seen) == {}
        assert OLD_SECRET not in seen
    assert RawTable(cli_env).every_byte() == before
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin")
    code, out, err = run(capsys, "sem", "get", f"{KEY}3", "--tenant", "acme", "--json")
    assert (code, found(out)) == (0, {API_KEY: 1}), err


def test_the_cli_refuses_personal_data_in_sem_put_and_memories_add(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, "sem", "put", "user/person/alice/city", '"Paris"')[0] == 0
    before = RawTable(cli_env).every_byte()
    code, out, err = run(capsys, "sem", "put", KEY, f'{{"password": "{PASSWORD}"}}')
    assert (code, out) == (2, "")
    assert err.startswith("mace: INVALID_INPUT: value.password holds a value kept under")
    assert_clean_refusal(err, "privacy rules never let the ledger keep in clear")
    monkeypatch.setenv("MACE_ACTOR", "olga")
    monkeypatch.setenv("MACE_ROLES", "operator")
    code, out, err = run(capsys, "memories", "add", "--fact", KEY, f'"{SSN}"', "--tenant", "acme")
    assert (code, out) == (2, "")
    assert err.startswith("mace: INVALID_INPUT: value holds what looks like a US social security")
    assert_clean_refusal(err, "privacy rules never let the ledger keep in clear")
    assert RawTable(cli_env).every_byte() == before


def test_http_refuses_personal_data_in_memories_and_redacts_older_ones(api: Api) -> None:
    before = api.position()
    bodies: list[tuple[dict[str, Any], str]] = [
        ({"kind": "fact", "key": KEY, "value": {"password": PASSWORD}}, "value.password holds"),
        ({"kind": "fact", "key": KEY, "value": f"card {CARD}"}, "value holds what looks like"),
        ({"kind": "episode", "text": f"alice's key {API_KEY}"}, "text holds what looks like"),
    ]
    for body, expected in bodies:
        response = api.post("/v1/memories", {"labels": [], **body}, "operator")
        assert_clean_refusal(assert_error(response, 422, "INVALID_INPUT"), expected)
    assert api.position() == before
    store_before_the_rules(api.ledger, "acme")
    for who in ("operator", "auditor"):
        response = api.get("/v1/memories", who)
        assert response.status_code == 200, response.content
        assert found(response.content) == {} and OLD_SECRET.encode() not in response.content
        assert PII_MARK in response.text
    admin = api.get("/v1/memories", "admin")
    assert set(found(admin.content)) == {PASSWORD, SSN, CARD, API_KEY}


def test_a_stage0_jobs_sem_write_is_kept_as_it_was_and_shown_redacted(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Stage-0 runtime refuses only denied attributes (its refusal marks): an SSN told as a
    favourite colour is its SEM write, unchanged; a non-admin ``mace sem get`` shows none of it."""
    code, out, err = run(capsys, "run", f"my favorite color is {SSN}", "--seed", "s1", "--json")
    assert code == 0, err
    assert [w["value"] for w in orjson.loads(out)["sem_writes"]] == [SSN]
    color = "user/person/default/favorite_color"
    assert run(capsys, "sem", "get", color)[1].startswith(f'{color} = "{PII_MARK}"')
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin")
    assert run(capsys, "sem", "get", color)[1].startswith(f'{color} = "{SSN}"')
