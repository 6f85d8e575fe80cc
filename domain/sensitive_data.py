"""Which recorded values are personal data or secrets: by the name they are kept under, or by
what they look like. One classification for every way a run comes in and every redacted read.

By name (`sensitive_name`), case-insensitive, camelCase, snake_case and kebab-case alike:

- the attributes a job's privacy snapshot denies, as whole words (`denied_word`: ``bank_pin``);
- words that name a secret wherever they stand (``password``, ``userPassword``, ``passwd``,
  ``secret``, ``client_secret``, ``apiKey``, ``private_key``, ``ssn``, ``card_number``, ...);
- ``token``, ``pin``, ``cvv``, ``authorization``, ``cookie`` and ``bearer`` only as the last
  word of a name (``access_token``, ``authToken``): ``max_tokens`` and ``token_count`` are counts.

A SEM entry (``{"key": "user/x/<attribute>", "value": ...}``) is named by its key's attribute.
A value under such a name is personal unless it holds nothing to hide: null, a boolean, an empty
string, a refusal mark (`domain.stage0.refusals`), or a redaction marker (``[REDACTED...]``).

By value (`sensitive_text`), in any text: private key blocks, API keys of well-known shapes
(``sk-``, ``AKIA``, ``ghp_``, ``xox?-``, ``AIza``), bearer tokens and JWTs, a password or key
written as ``password: ...``/``api_key=...``, US social security numbers (``123-45-6789``), and
payment card numbers (13 to 19 digits, spaces or dashes allowed, passing the Luhn check). Email
addresses and phone numbers are not on the list: the seeds' rules do not name them. Every pattern
is linear in the text (no nested quantifiers), so a hostile text costs no more than its length.

Values written outside any run (``mace sem put``, a memory) are held to the same classification
(`refuse_sensitive`): refused, naming the field's path and never the value.

Names of the ledger's own fields that say what rather than hold what (``*_hash``, digests,
timestamps) are never searched: their values are hashes, and a hash of a secret is not the secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from domain.errors import InvalidInput
from domain.stage0.config import denied_word
from domain.stage0.refusals import is_mark

ANYWHERE: Final = (
    ("password",),
    ("passwd",),
    ("passphrase",),
    ("secret",),
    ("secrets",),
    ("api", "key"),
    ("apikey",),
    ("access", "key"),
    ("private", "key"),
    ("secret", "key"),
    ("ssn",),
    ("social", "security"),
    ("card", "number"),
    ("credit", "card"),
    ("cvv",),
    ("cvc",),
)
"""Words (as whole words, in order) that name a secret wherever they stand in a name."""
LAST_WORD: Final = frozenset({"token", "pin", "authorization", "cookie", "bearer"})
"""Words that name a secret only as the last word of a name (``token_count`` is a count)."""

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
REDACTION_MARKER: Final = re.compile(r"^\[REDACTED(?::[a-z_]+)?\]$")
HEX_DIGEST: Final = re.compile(r"^[0-9a-f]{64}$")
TIMESTAMP: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")

_PATTERNS: Final = (
    ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")),
    (
        "an API key",
        re.compile(
            r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{20,}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"
            r"|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}"
            r"|AIza[0-9A-Za-z_-]{35})"
        ),
    ),
    ("a bearer token", re.compile(r"(?i)\bbearer\s{1,4}[A-Za-z0-9._~+/-]{16,}")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")),
    (
        "a password or key",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:password|passwd|passphrase|api[_-]?key|"
            r"access[_-]?token)[\"']?\s{0,3}[:=]\s{0,3}[\"']?[^\s\"',;]{3,}"
        ),
    ),
    (
        "a US social security number",
        re.compile(r"(?<![0-9A-Za-z-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![0-9-])"),
    ),
)
_CARD = re.compile(r"(?<![0-9A-Za-z_-])\d(?:[ -]?\d){12,18}(?![0-9A-Za-z_-])")


@dataclass(frozen=True, slots=True)
class SensitiveValue:
    """Where a value holds personal data or a secret (a path such as ``arguments.password``),
    and why, in words that never repeat the value."""

    path: str
    why: str


class ClearSensitiveValue(InvalidInput):
    """A write holds personal data or a secret in clear; the message names where, never what."""


def refuse_sensitive(value: Any, denied: Iterable[str]) -> None:
    """Raise `ClearSensitiveValue` naming the first place in ``value`` (a write's fields, by
    name) holding personal data, as a run's recording refuses it."""
    found = first_sensitive(value, denied)
    if found is not None:
        message = (
            f"{found.path} holds {found.why}, which the privacy rules never let the ledger keep"
            " in clear: keep a reference to it, never the value"
        )
        raise ClearSensitiveValue(message)


def sensitive_name(name: str, denied: Iterable[str] = ()) -> str | None:
    """What makes ``name`` (a field or SEM attribute) a secret's name, or None."""
    return _sensitive_name(name, tuple(denied))


@lru_cache(maxsize=4096)
def _sensitive_name(name: str, denied: tuple[str, ...]) -> str | None:
    # Memoised: a run's events repeat the same few field names thousands of times, and this
    # word-by-word test was most of the time a batch of events took to be taken in.
    words: list[str] = [w.lower() for w in _WORD.findall(name)]
    if not words:
        return None
    term = denied_word("_".join(words), denied)
    if term is not None:
        return term
    if words[-1] in LAST_WORD:
        return words[-1]
    for term_words in ANYWHERE:
        span = len(term_words)
        if any(tuple(words[i : i + span]) == term_words for i in range(len(words) - span + 1)):
            return "_".join(term_words)
    return None


def sensitive_text(text: str) -> str | None:
    """What personal data or secret ``text`` holds, by its shape, or None."""
    if len(text) <= REMEMBERED_TEXT:
        return _remembered_text(text)
    return _text_verdict(text)


REMEMBERED_TEXT: Final = 256
"""The longest text whose verdict is memoised: a run repeats the same short texts (agent names,
statuses, stages, field values) in every event, and the patterns were most of a walk's time."""


@lru_cache(maxsize=4096)
def _remembered_text(text: str) -> str | None:
    return _text_verdict(text)


def _text_verdict(text: str) -> str | None:
    if HEX_DIGEST.fullmatch(text) or TIMESTAMP.fullmatch(text):
        return None
    for why, pattern in _PATTERNS:
        if pattern.search(text):
            return why
    for candidate in _CARD.finditer(text):
        if _luhn(re.sub(r"[ -]", "", candidate[0])):
            return "a payment card number"
    return None


def holds_nothing(value: Any) -> bool:
    """Whether a value under a secret's name hides nothing (null, a flag, a mark, emptied)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        return value == "" or is_mark(value) or REDACTION_MARKER.fullmatch(value) is not None
    if isinstance(value, dict):
        return all(holds_nothing(item) for item in value.values())
    if isinstance(value, list):
        return all(holds_nothing(item) for item in value)
    return False


def names_nothing(name: str) -> bool:
    """Whether a field is the ledger's own hash of content: its value is never a secret."""
    return name.endswith(("_hash", "_hashes")) or name == "digest"


def first_sensitive(value: Any, denied: Iterable[str], path: str = "") -> SensitiveValue | None:
    """The first place in ``value`` (depth first, in key order) holding personal data."""
    return _first_sensitive(value, tuple(denied), path)


def _first_sensitive(value: Any, denied: tuple[str, ...], path: str) -> SensitiveValue | None:
    if isinstance(value, dict):
        return _first_in_object(value, denied, path)
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_sensitive(item, denied, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(value, str):
        why = sensitive_text(value)
        return None if why is None else SensitiveValue(path, f"what looks like {why}")
    return None


def _first_in_object(
    value: dict[Any, Any], denied: tuple[str, ...], path: str
) -> SensitiveValue | None:
    key = value.get("key")
    if isinstance(key, str) and "value" in value and not holds_nothing(value["value"]):
        term = _sensitive_name(key.rsplit("/", 1)[-1], denied)
        if term is not None:
            return SensitiveValue(_at(path, "value"), f"a value kept under {term!r}")
    for name, item in value.items():
        searched, term = _field_verdict(str(name), denied)
        if not searched:
            continue
        if term is not None and not holds_nothing(item):
            return SensitiveValue(_at(path, str(name)), f"a value kept under {term!r}")
        # Most fields are plain values: their path is spelled only when one holds something.
        found = None
        if isinstance(item, str):
            why = sensitive_text(item)
            if why is not None:
                found = SensitiveValue(_at(path, str(name)), f"what looks like {why}")
        elif isinstance(item, dict | list):
            found = _first_sensitive(item, denied, _at(path, str(name)))
        if found is not None:
            return found
    return None


@lru_cache(maxsize=4096)
def _field_verdict(name: str, denied: tuple[str, ...]) -> tuple[bool, str | None]:
    """Whether a field's value is searched at all (`names_nothing`), and the secret its name
    names: once per name (an event's fields repeat in every event)."""
    if names_nothing(name):
        return False, None
    return True, _sensitive_name(name, denied)


def _at(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _luhn(digits: str) -> bool:
    if len(set(digits)) == 1:  # 0000 0000 0000 0 passes the sum, and is no card
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        number = int(char)
        if position % 2:
            number = number * 2 - 9 if number > 4 else number * 2
        total += number
    return total % 10 == 0
