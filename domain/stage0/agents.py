"""The four Stage-0 agents. Each is a pure function of its request and what SEM answers.

An agent reaches memory only through the `Memory` port it is given; the runtime behind that port
canonicalises keys, applies the privacy policy and records every read and write as an event. An
agent that raises has failed (F4); one that raises `CannotHandle` has no way to answer and hands
the request to ``generic_agent`` (F3).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Protocol

from domain.canonical import canonical_json
from domain.sem import SemKeyError, SemRecord, SemVocabulary
from domain.stage0.config import GENERIC_AGENT
from domain.stage0.refusals import value_text
from domain.stage0.replies import F1_SEM_MISS, F3_NO_AGENT, F4_AGENT_FAILURE, F5_SEM_WRITE_FAILURE

INT64_MAX: Final = 2**63 - 1
MAX_OPERAND_DIGITS: Final = 19


class Memory(Protocol):
    def key(self, raw: str) -> str:
        """The canonical key (S1-S4); SemKeyError names the rule a bad key breaks."""

    def read(self, key: str) -> SemRecord:
        """S7: the record under a canonical key; a miss if there is none (S9)."""

    def write(self, raw: str, value: Any) -> tuple[str, SemRecord | None]:
        """S5: store ``value``; the key it went under and the stored record, None on failure."""


class CannotHandle(Exception):
    """The agent has no way to answer this request."""


@dataclass(frozen=True, slots=True)
class AgentRequest:
    text: str
    user: str
    vocabulary: SemVocabulary
    after_failure: bool = False


@dataclass(frozen=True, slots=True)
class AgentReply:
    text: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)


Agent = Callable[[AgentRequest, Memory], AgentReply]


def words_to_segment(words: str) -> str:
    """``"Favorite Color"`` -> ``"favorite_color"``; anything else is left for SEM to refuse."""
    return re.sub(r"[\s\-]+", "_", words.strip().lower())


def _strip_end(text: str) -> str:
    return text.strip().rstrip("?.!").strip()


# math_agent: ``a op b`` for + - * / ^ on non-negative integers.

_EXPRESSION: Final = re.compile(r"^\s*(\d+)\s*([+\-*/^])\s*(\d+)\s*$")


def _power(base: int, exponent: int) -> int:
    if base > 1 and exponent >= 64:  # the result could not fit in 64 bits: do not compute it
        msg = f"{base} ^ {exponent} exceeds the signed 64-bit range"
        raise OverflowError(msg)
    return int(base**exponent)


def calculate(a: int, op: str, b: int) -> int | float:
    """Exact arithmetic: integer results stay integers; division by zero raises (F4)."""
    if op == "/":
        quotient = Fraction(a, b)  # ZeroDivisionError for b == 0
        result: int | float = quotient.numerator if quotient.denominator == 1 else float(quotient)
    elif op == "^":
        result = _power(a, b)
    else:
        result = {"+": a + b, "-": a - b, "*": a * b}[op]
    if isinstance(result, int) and not -INT64_MAX - 1 <= result <= INT64_MAX:
        msg = f"{a} {op} {b} exceeds the signed 64-bit range"
        raise OverflowError(msg)
    return result


def math_agent(request: AgentRequest, memory: Memory) -> AgentReply:
    match = _EXPRESSION.fullmatch(request.text)
    if match is None:
        raise CannotHandle
    left, op, right = match.groups()
    if max(len(left), len(right)) > MAX_OPERAND_DIGITS:
        msg = "operands beyond 19 digits exceed the signed 64-bit range"
        raise OverflowError(msg)
    result = calculate(int(left), op, int(right))
    expression = f"{int(left)} {op} {int(right)}"
    return AgentReply(
        text=f"{expression} = {canonical_json(result).decode()}",
        claims=[{"expression": expression, "value": result}],
        evidence=[{"kind": "computation", "agent": "math_agent"}],
    )


# profile_agent: "my favorite X is Y" (or "remember my X is Y") writes, "what is my X" reads.

_PROFILE_WRITE: Final = re.compile(
    r"^\s*(?:remember\s+(?:that\s+)?)?my\s+(?P<attribute>.+?)\s+is\s+(?P<value>.+?)\s*[.!]?\s*$",
    re.IGNORECASE,
)
_PROFILE_READ: Final = re.compile(
    r"^\s*(?:what\s+is|what's|whats|tell\s+me)\s+my\s+(?P<attribute>.+?)\s*\??\s*$",
    re.IGNORECASE,
)


def profile_key(user: str, attribute_words: str) -> str:
    return f"user/person/{words_to_segment(user)}/{words_to_segment(attribute_words)}"


def profile_agent(request: AgentRequest, memory: Memory) -> AgentReply:
    if read := _PROFILE_READ.fullmatch(request.text):
        attribute = read["attribute"]
        reply = _recall(memory, profile_key(request.user, attribute))
        if reply.claims:
            value = reply.claims[0]["value"]
            return AgentReply(f"Your {attribute.lower()} is {value_text(value)}.", *_facts(reply))
        return reply
    if write := _PROFILE_WRITE.fullmatch(request.text):
        attribute, value = write["attribute"], write["value"]
        key, stored = memory.write(profile_key(request.user, attribute), value)
        if stored is None:
            return AgentReply(F5_SEM_WRITE_FAILURE)
        return AgentReply(
            text=f"Noted: your {attribute.lower()} is {value}.",
            claims=[{"key": key, "value": value}],
            evidence=[{"kind": "sem_write", "key": key, "last_updated": stored.last_updated}],
        )
    raise CannotHandle


def _recall(memory: Memory, raw_key: str) -> AgentReply:
    """Read one fact: its value as the reply, or F1 on a miss or an unusable key (S9)."""
    try:
        key = memory.key(raw_key)
    except SemKeyError:
        return AgentReply(F1_SEM_MISS)
    record = memory.read(key)
    if not record.exists:
        return AgentReply(F1_SEM_MISS)
    return AgentReply(
        text=value_text(record.value),
        claims=[{"key": key, "value": record.value}],
        evidence=[{"kind": "sem_read", "key": key, "last_updated": record.last_updated}],
    )


def _facts(reply: AgentReply) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return reply.claims, reply.evidence


# knowledge_agent: world facts from SEM, never invented (S9, F1).

_QUESTIONS: Final = (
    (re.compile(r"^(?:what\s+is|what's)\s+the\s+(?P<a>.+?)\s+of\s+(?P<e>.+)$", re.I), None),
    (re.compile(r"^(?:what\s+is|what's|who\s+is|who's)\s+(?P<e>.+)$", re.I), "description"),
    (re.compile(r"^define\s+(?P<e>.+)$", re.I), "definition"),
    (re.compile(r"^when\s+was\s+(?P<e>.+?)\s+(?P<verb>[a-z]+)$", re.I), "{verb}_on"),
    (re.compile(r"^where\s+is\s+(?P<e>.+)$", re.I), "location"),
)
_ARTICLE: Final = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


def world_key(question: str, vocabulary: SemVocabulary) -> str | None:
    """The SEM key a world-fact question asks about, or None if it is not one we can parse."""
    text = _strip_end(question)
    for pattern, fixed_attribute in _QUESTIONS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        groups = match.groupdict()
        entity = words_to_segment(_ARTICLE.sub("", groups["e"]))
        if fixed_attribute is None:
            attribute = words_to_segment(groups["a"])
        else:
            attribute = fixed_attribute.format(verb=(groups.get("verb") or "").lower())
        entity_type = vocabulary.entity_type_of(
            vocabulary.synonyms.get("entity_id", {}).get(entity, entity)
        )
        return f"world/{entity_type}/{entity}/{attribute}"
    return None


def knowledge_agent(request: AgentRequest, memory: Memory) -> AgentReply:
    key = world_key(request.text, request.vocabulary)
    return AgentReply(F1_SEM_MISS) if key is None else _recall(memory, key)


def generic_agent(request: AgentRequest, memory: Memory) -> AgentReply:
    """F3 when no module fits; F4's partial answer when another module failed first."""
    return AgentReply(F4_AGENT_FAILURE if request.after_failure else F3_NO_AGENT)


AGENTS: Final[dict[str, Agent]] = {
    "math_agent": math_agent,
    "profile_agent": profile_agent,
    "knowledge_agent": knowledge_agent,
    GENERIC_AGENT: generic_agent,
}
