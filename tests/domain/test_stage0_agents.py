"""The four Stage-0 agents and seed 004 section 3's replies F1-F5, byte for byte.

Each agent is called with a real `RecordingMemory` over a SEM held in a dict, so keys are
canonicalised (S1-S4), the privacy policy applies and every read and write is an event.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.stage0_support import InMemorySem, fact, quoted_sentences, seed_004_text

from domain.events import RunEvent, SemRead, SemWrite
from domain.sem import MISS, SemRecord, SemVocabulary, canonical_key
from domain.stage0.agents import (
    AGENTS,
    AgentRequest,
    CannotHandle,
    generic_agent,
    knowledge_agent,
    math_agent,
    profile_agent,
    world_key,
)
from domain.stage0.config import DEFAULT_BRAINSTATE, DEFAULT_PRIVACY
from domain.stage0.replies import F1_SEM_MISS, F3_NO_AGENT, F4_AGENT_FAILURE, F5_SEM_WRITE_FAILURE
from projections.stage0_runtime import RecordingMemory

VOCABULARY = DEFAULT_BRAINSTATE.sem

# Copied from seed 004 section 3; the typographic apostrophe is U+2019.
F1_TEXT = "I don’t have this information stored yet."
F3_TEXT = "I currently don’t have a module for this type of request."
F4_TEXT = (
    "One of my internal modules failed while processing this; here is a partial answer based "
    "on the remaining modules."
)
F5_TEXT = "I tried to store this, but my memory backend failed. I may not remember this next time."


class Sem:
    """A RecordingMemory over an in-memory SEM, keeping the events it records."""

    def __init__(self, *facts: Any) -> None:
        self.events: list[RunEvent] = []
        self.memory = RecordingMemory(
            InMemorySem(*facts), VOCABULARY, DEFAULT_PRIVACY, self.events.append, 0, "job:test"
        )


class BrokenBackend:
    """A Memory whose backend fails every write (the situation F5 answers)."""

    def key(self, raw: str) -> str:
        return canonical_key(raw, VOCABULARY)

    def read(self, key: str) -> SemRecord:
        return MISS

    def write(self, raw: str, value: Any) -> tuple[str, SemRecord | None]:
        return raw, None


def ask(text: str, user: str = "alice", *, after_failure: bool = False) -> AgentRequest:
    return AgentRequest(text=text, user=user, vocabulary=VOCABULARY, after_failure=after_failure)


# Replies F1-F5


@pytest.mark.parametrize(
    ("constant", "literal"),
    [
        (F1_SEM_MISS, F1_TEXT),
        (F3_NO_AGENT, F3_TEXT),
        (F4_AGENT_FAILURE, F4_TEXT),
        (F5_SEM_WRITE_FAILURE, F5_TEXT),
    ],
    ids=["F1", "F3", "F4", "F5"],
)
def test_reply_is_the_seed_sentence_byte_for_byte(constant: str, literal: str) -> None:
    assert constant.encode("utf-8") == literal.encode("utf-8")
    assert literal in quoted_sentences(seed_004_text())


def test_F1_and_F3_use_the_typographic_apostrophe() -> None:
    for reply in (F1_SEM_MISS, F3_NO_AGENT):
        assert "\u2019" in reply
        assert "'" not in reply
    assert F1_SEM_MISS.encode() == b"I don\xe2\x80\x99t have this information stored yet."


def test_agents_are_the_four_stage0_modules() -> None:
    assert set(AGENTS) == {"math_agent", "profile_agent", "knowledge_agent", "generic_agent"}


# math_agent


@pytest.mark.parametrize(
    ("text", "reply", "value"),
    [
        ("2 + 3", "2 + 3 = 5", 5),
        ("2+3", "2 + 3 = 5", 5),
        ("10 - 4", "10 - 4 = 6", 6),
        ("2 - 5", "2 - 5 = -3", -3),
        ("6 * 7", "6 * 7 = 42", 42),
        ("  12*3 ", "12 * 3 = 36", 36),
        ("6 / 3", "6 / 3 = 2", 2),
        ("0 / 5", "0 / 5 = 0", 0),
        ("7 / 2", "7 / 2 = 3.5", 3.5),
        ("2 ^ 10", "2 ^ 10 = 1024", 1024),
        ("0 ^ 0", "0 ^ 0 = 1", 1),
        ("2 ^ 62", "2 ^ 62 = 4611686018427387904", 2**62),
        ("007 + 1", "7 + 1 = 8", 8),
        ("9223372036854775807 + 0", "9223372036854775807 + 0 = 9223372036854775807", 2**63 - 1),
    ],
)
def test_math_agent_exact_results(text: str, reply: str, value: int | float) -> None:
    answer = math_agent(ask(text), Sem().memory)
    assert answer.text == reply
    expression = reply.split(" = ", maxsplit=1)[0]
    assert answer.claims == [{"expression": expression, "value": value}]
    assert type(answer.claims[0]["value"]) is type(value)
    assert answer.evidence == [{"kind": "computation", "agent": "math_agent"}]


def test_math_agent_integer_division_stays_int() -> None:
    value = math_agent(ask("6/3"), Sem().memory).claims[0]["value"]
    assert value == 2
    assert isinstance(value, int)


def test_math_agent_inexact_division_is_a_float_written_canonically() -> None:
    answer = math_agent(ask("1 / 3"), Sem().memory)
    assert answer.claims[0]["value"] == 1 / 3
    assert isinstance(answer.claims[0]["value"], float)
    assert answer.text == "1 / 3 = 0.333333333"


def test_math_agent_division_by_zero_raises() -> None:
    with pytest.raises(ZeroDivisionError):
        math_agent(ask("4 / 0"), Sem().memory)


@pytest.mark.parametrize(
    "text",
    [
        "2 ^ 70",
        "2 ^ 63",
        "3 ^ 9999999999",
        "9223372036854775807 + 1",
        "9999999999 * 9999999999",
        "12345678901234567890 + 1",  # 20 digits
        "1 + 12345678901234567890",
        "00000000000000000001 + 1",  # 20 digits, even if small
    ],
)
def test_math_agent_refuses_results_beyond_signed_64_bits(text: str) -> None:
    with pytest.raises(OverflowError):
        math_agent(ask(text), Sem().memory)


@pytest.mark.parametrize("text", ["hello", "2 + 2 + 2", "-1 + 1", "1.5 * 2"])
def test_math_agent_declines_what_is_not_one_operation(text: str) -> None:
    with pytest.raises(CannotHandle):
        math_agent(ask(text), Sem().memory)


def test_math_agent_does_not_touch_memory() -> None:
    sem = Sem()
    math_agent(ask("2 + 3"), sem.memory)
    assert sem.events == []


# profile_agent


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("my favorite color is blue", "user/person/alice/favorite_color", "blue"),
        ("My favorite color is blue.", "user/person/alice/favorite_color", "blue"),
        ("my favourite colour is blue", "user/person/alice/favorite_color", "blue"),
        ("remember my favorite food is pasta", "user/person/alice/favorite_food", "pasta"),
        ("remember that my favorite food is pasta!", "user/person/alice/favorite_food", "pasta"),
    ],
)
def test_profile_agent_writes_user_facts(text: str, key: str, value: str) -> None:
    sem = Sem()
    answer = profile_agent(ask(text), sem.memory)
    record = sem.memory.written[key].read()
    assert record.value == value
    assert sem.events == [
        SemWrite(
            iteration=0,
            key=key,
            value=value,
            status="written",
            last_updated=record.last_updated,
        )
    ]
    assert answer.claims == [{"key": key, "value": value}]
    assert answer.evidence == [
        {"kind": "sem_write", "key": key, "last_updated": record.last_updated}
    ]


def test_profile_agent_acknowledges_a_write() -> None:
    answer = profile_agent(ask("my favorite color is blue"), Sem().memory)
    assert answer.text == "Noted: your favorite color is blue."


def test_profile_agent_answers_from_sem() -> None:
    key = "user/person/alice/favorite_color"
    sem = Sem(fact(key, "blue"))
    answer = profile_agent(ask("what is my favorite color?"), sem.memory)
    assert answer.text == "Your favorite color is blue."
    last_updated = fact(key, "blue").read().last_updated
    assert answer.claims == [{"key": key, "value": "blue"}]
    assert answer.evidence == [{"kind": "sem_read", "key": key, "last_updated": last_updated}]
    assert sem.events == [
        SemRead(iteration=0, key=key, exists=True, value="blue", last_updated=last_updated)
    ]


def test_profile_agent_reads_what_it_wrote_under_any_synonym() -> None:
    sem = Sem()
    profile_agent(ask("my favorite color is blue"), sem.memory)
    answer = profile_agent(ask("What is my favourite colour?"), sem.memory)
    assert answer.text == "Your favourite colour is blue."


def test_profile_agent_facts_are_per_user() -> None:
    sem = Sem(fact("user/person/bob/favorite_color", "red"))
    assert profile_agent(ask("what is my favorite color?", "bob"), sem.memory).text == (
        "Your favorite color is red."
    )
    assert profile_agent(ask("what is my favorite color?", "alice"), sem.memory).text == F1_TEXT


def test_F1_profile_miss_byte_for_byte() -> None:
    sem = Sem()
    answer = profile_agent(ask("what is my favorite color?"), sem.memory)
    assert answer.text.encode() == F1_TEXT.encode()
    assert answer.claims == []
    assert answer.evidence == []
    assert sem.events == [
        SemRead(iteration=0, key="user/person/alice/favorite_color", exists=False)
    ]


def test_F1_profile_read_of_an_unusable_key_is_a_miss() -> None:
    sem = Sem()
    answer = profile_agent(ask("what is my favorite color?", user="alice.smith"), sem.memory)
    assert answer.text == F1_TEXT
    assert sem.events == []


@pytest.mark.parametrize(
    ("text", "user", "reason"),
    [
        ("remember my password is hunter2", "alice", "privacy policy denies"),
        ("my favorite color is blue", "alice.smith", "rule S2"),
    ],
)
def test_F5_profile_write_failure(text: str, user: str, reason: str) -> None:
    sem = Sem()
    answer = profile_agent(ask(text, user), sem.memory)
    assert answer.text == F5_TEXT
    assert answer.claims == []
    assert sem.memory.written == {}
    [event] = sem.events
    assert isinstance(event, SemWrite)
    assert event.status == "failed"
    assert event.last_updated is None
    assert event.reason is not None
    assert reason in event.reason


def test_F5_profile_write_when_the_backend_fails() -> None:
    assert profile_agent(ask("my favorite color is blue"), BrokenBackend()).text == F5_TEXT


@pytest.mark.parametrize("text", ["my favorite color", "i like my favorite color", "hello"])
def test_profile_agent_declines_what_is_neither_a_read_nor_a_write(text: str) -> None:
    with pytest.raises(CannotHandle):
        profile_agent(ask(text), Sem().memory)


# knowledge_agent


@pytest.mark.parametrize(
    ("question", "key"),
    [
        ("what is the capital of france", "world/country/france/capital"),
        ("What is the capital of France?", "world/country/france/capital"),
        ("what's the capital city of japan", "world/country/japan/capital_city"),
        ("what is the capital of the uk", "world/country/uk/capital"),
        ("what is the population of new york", "world/entity/new_york/population"),
        ("who is Ada Lovelace", "world/entity/ada_lovelace/description"),
        ("what is entropy", "world/entity/entropy/description"),
        ("define entropy", "world/entity/entropy/definition"),
        ("when was Paris founded", "world/city/paris/founded_on"),
        ("where is Tokyo?", "world/city/tokyo/location"),
    ],
)
def test_world_key_with_the_default_vocabulary(question: str, key: str) -> None:
    assert world_key(question, VOCABULARY) == key


def test_world_key_types_entities_from_the_vocabulary() -> None:
    assert world_key("what is the capital of france", SemVocabulary()) == (
        "world/entity/france/capital"
    )


@pytest.mark.parametrize("question", ["define", "hello", "2 + 2"])
def test_world_key_is_none_for_what_is_not_a_question(question: str) -> None:
    assert world_key(question, VOCABULARY) is None


def test_knowledge_agent_answers_world_facts_from_sem() -> None:
    key = "world/country/france/capital"
    sem = Sem(fact(key, "Paris"))
    answer = knowledge_agent(ask("what is the capital of france"), sem.memory)
    last_updated = fact(key, "Paris").read().last_updated
    assert answer.text == "Paris"
    assert answer.claims == [{"key": key, "value": "Paris"}]
    assert answer.evidence == [{"kind": "sem_read", "key": key, "last_updated": last_updated}]


def test_knowledge_agent_reads_the_canonical_key_of_synonyms() -> None:
    sem = Sem(fact("world/country/united_kingdom/capital", "London"))
    answer = knowledge_agent(ask("What's the capital city of the UK?"), sem.memory)
    assert answer.text == "London"


def test_knowledge_agent_writes_non_text_values_as_canonical_json() -> None:
    sem = Sem(fact("world/country/japan/population", 125_000_000))
    assert knowledge_agent(ask("what is the population of japan"), sem.memory).text == "125000000"


@pytest.mark.parametrize("question", ["what is the capital of atlantis", "what is 2+2", "define"])
def test_F1_knowledge_miss(question: str) -> None:
    answer = knowledge_agent(
        ask(question), Sem(fact("world/country/france/capital", "Paris")).memory
    )
    assert answer.text.encode() == F1_TEXT.encode()
    assert answer.claims == []


# generic_agent


def test_F3_generic_agent() -> None:
    assert generic_agent(ask("hello"), Sem().memory).text == F3_TEXT


def test_F4_generic_agent_after_failure() -> None:
    assert generic_agent(ask("4 / 0", after_failure=True), Sem().memory).text == F4_TEXT
