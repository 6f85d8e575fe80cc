"""The one classification of personal data and secrets (`domain.sensitive_data`), by name and by
value: what it catches, what it leaves alone, and that it never repeats the value it found."""

from __future__ import annotations

import pytest
from support.canaries import API_KEY, BEARER, CARD, PASSWORD, PEM, SSN

from domain.sensitive_data import first_sensitive, sensitive_name, sensitive_text
from domain.stage0.config import DEFAULT_PRIVACY

DENIED = DEFAULT_PRIVACY.deny_sem_attributes


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (f"ssn {SSN}", "a US social security number"),
        (f"card {CARD}", "a payment card number"),
        ("card 4111-1111-1111-1111", "a payment card number"),
        (f"key {API_KEY}", "an API key"),
        (f"{PEM}\nMIIB...", "a private key"),
        (f"Authorization: {BEARER}", "a bearer token"),
        (f"password: {PASSWORD}", "a password or key"),
        ('{"api_key": "abc123"}', "a password or key"),
    ],
)
def test_a_text_holding_a_secret_or_an_identifier_is_found(text: str, why: str) -> None:
    assert sensitive_text(text) == why


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112",  # fails the Luhn check
        "0000 0000 0000 0000",
        "call 555-123-4567 at 2026-11-27T09:00:00Z",
        "task-1234567890abcdefghijkl",  # "sk-" inside a word
        "4111111111111111" + "a" * 48,  # a digest's digits
        "f" * 64,
        "the password is reset by the admin",
        "order 12345678901234567890",  # too many digits for a card
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert sensitive_text(text) is None


@pytest.mark.parametrize(
    ("name", "term"),
    [
        ("password", "password"),
        ("user_password", "password"),
        ("userPassword", "password"),
        ("apiKey", "api_key"),
        ("X-Api-Key", "api_key"),
        ("client_secret", "secret"),
        ("access_token", "token"),
        ("authToken", "token"),
        ("SSN", "ssn"),
        ("card_number", "card_number"),
        ("bank_pin", "pin"),
        ("favorite_ssn", "ssn"),
    ],
)
def test_a_secrets_name_is_found_in_any_case_style(name: str, term: str) -> None:
    assert sensitive_name(name, DENIED) == term


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "prompt_tokens", "token_count", "passwordless", "spinach", "class_name", "key"],
)
def test_names_that_only_look_alike_are_kept(name: str) -> None:
    assert sensitive_name(name, DENIED) is None


def test_the_first_place_is_named_and_the_value_is_not_repeated() -> None:
    value = {"query": "ok", "auth": {"headers": {"Authorization": BEARER}}}
    found = first_sensitive(value, DENIED)
    assert found is not None
    assert (found.path, found.why) == (
        "auth.headers.Authorization",
        "a value kept under 'authorization'",
    )
    assert BEARER not in found.why
    sem = {"key": "user/person/alice/ssn", "value": "x"}
    assert first_sensitive(sem, DENIED) == first_sensitive(
        {"value": "x", "key": sem["key"]}, DENIED
    )
    assert first_sensitive({"list": ["fine", f"ssn {SSN}"]}, DENIED).path == "list[1]"  # type: ignore[union-attr]


def test_a_value_that_hides_nothing_is_kept_under_a_secrets_name() -> None:
    kept = {"password": None, "has_password": True, "pin": "", "token": "[REDACTED]"}
    assert first_sensitive(kept, DENIED) is None
    assert first_sensitive({"request_hash": "a" * 64, "digest": "b" * 64}, DENIED) is None
