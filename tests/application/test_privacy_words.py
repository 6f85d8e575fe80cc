"""A denied attribute is refused wherever it is a word of the attribute a job or run writes.

The privacy snapshot lists words (``ssn``, ``pin``, ``password``, ``credit_card``): a SEM
attribute is snake_case, and one whose words include a denied one (``favorite_ssn``,
``bank_pin``, ``email_password``, ``old_credit_card_number``) holds what the rule is about just as
the bare word does. A word that merely contains the letters (``spinach``, ``opinion``,
``passwordless``) is another word and is kept. Each storing test runs on SQLite and PostgreSQL and
searches the raw events table byte by byte.
"""

from __future__ import annotations

import pytest
from support.ledger_fixtures import RawTable, run, store_of

from domain.events import RunStarted, SemWrite
from domain.stage0.config import DEFAULT_PRIVACY, PrivacyPolicy, PrivacyRefusal
from domain.stage0.replies import F5_SEM_WRITE_FAILURE
from infrastructure.application.ledger import Ledger
from infrastructure.application.privacy_rules import ClearPrivateValue
from infrastructure.application.run_recorder import RunRecorder
from infrastructure.storage.settings import Settings
from projections.redaction import PrivacyNeedles

SECRETS = {
    "my favorite ssn is 123456789": ("favorite_ssn", "123456789"),
    "remember my bank pin is 4321": ("bank_pin", "4321"),
    "remember my email password is hunter2": ("email_password", "hunter2"),
    "remember my old credit card number is 4111111111111111": (
        "old_credit_card_number",
        "4111111111111111",
    ),
}


@pytest.mark.parametrize("text", sorted(SECRETS))
def test_a_denied_word_inside_an_attribute_is_refused_and_stored_nowhere(
    ledger: Ledger, raw_table: RawTable, text: str
) -> None:
    attribute, secret = SECRETS[text]
    log = ledger.jobs.run(text, "s1")
    stored = raw_table.every_byte()
    assert secret.encode() not in stored
    assert f"[refused:{attribute}:hmac-sha256:k1:".encode() in stored
    assert log.completion is not None
    assert log.completion.final_output == F5_SEM_WRITE_FAILURE
    (write,) = log.as_json()["iteration_trace"][0]["sem_writes"]
    assert write["status"] == "failed"
    assert f"attribute '{attribute}'" in write["reason"]
    assert ledger.sem.get(f"user/person/default/{attribute}")[1].exists is False


@pytest.mark.parametrize(
    ("attribute", "value"),
    [("favorite_spinach", "steamed"), ("favorite_opinion", "mild"), ("passwordless", "yes")],
)
def test_a_word_that_only_contains_the_letters_is_kept(
    ledger: Ledger, attribute: str, value: str
) -> None:
    words = attribute.replace("_", " ")
    log = ledger.jobs.run(f"remember my {words} is {value}", "s1")
    (write,) = log.as_json()["iteration_trace"][0]["sem_writes"]
    assert (write["status"], write["value"]) == ("written", value)


def test_sem_put_refuses_a_denied_word_inside_the_attribute(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "sem", "put", "user/person/alice/bank_pin", '"4321"')
    assert code == 2
    assert "bank_pin" in err and "4321" not in err
    assert run(capsys, "sem", "get", "user/person/alice/bank_pin")[1].endswith(": not stored\n")


@pytest.mark.parametrize(
    ("attribute", "denied_word"),
    [
        ("ssn", "ssn"),
        ("favorite_ssn", "ssn"),
        ("ssn_last_four", "ssn"),
        ("bank_pin", "pin"),
        ("pins", "pin"),
        ("email_passwords", "password"),
        ("credit_card", "credit_card"),
        ("old_credit_card_number", "credit_card"),
        ("spinach", None),
        ("pinned_note", None),
        ("opinion", None),
        ("passwordless", None),
        ("card_credit", None),
        ("credit_score", None),
    ],
)
def test_the_denied_word_is_matched_on_whole_snake_case_words(
    attribute: str, denied_word: str | None
) -> None:
    assert DEFAULT_PRIVACY.denied_word(attribute) == denied_word
    needles = PrivacyNeedles(frozenset(DEFAULT_PRIVACY.deny_sem_attributes))
    assert needles.is_denied(f"user/person/alice/{attribute}") is (denied_word is not None)
    if denied_word is None:
        DEFAULT_PRIVACY.check_storable(f"user/person/alice/{attribute}")
    else:
        with pytest.raises(PrivacyRefusal, match=attribute):
            DEFAULT_PRIVACY.check_storable(f"user/person/alice/{attribute}")


def test_matching_takes_time_linear_in_the_words_not_backtracking() -> None:
    """A long attribute of many near-misses is decided by comparing words, never a regex."""
    policy = PrivacyPolicy(deny_sem_attributes=["a_a_a_a_a_a_a_a_b"])
    assert policy.denied_word("_".join(["a"] * 5000)) is None
    assert policy.denied_word("_".join(["a"] * 5000) + "_b") == "a_a_a_a_a_a_a_a_b"


def test_an_outside_run_writing_a_denied_word_in_clear_is_refused(ledger: Ledger) -> None:
    write = SemWrite(
        iteration=0,
        key="user/person/alice/bank_pin",
        value="4321",
        status="failed",
        reason="denied",
    )
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed="r1", input="remember"))
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(ClearPrivateValue, match=r"^SemWrite\.value holds a value kept under 'pin'"):
        recorder.emit(write)
    assert store_of(ledger).recorder.max_notification_id() == before
