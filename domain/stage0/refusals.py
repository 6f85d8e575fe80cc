"""Values the privacy policy refused: recorded as a keyed digest and the rule, never in clear.

A job that tries to remember a value under an attribute its ``privacy`` snapshot denies (seed 004
F5) must not keep that value anywhere, yet its replay must reproduce it byte for byte. So the
live run replaces every occurrence of each refused value in the job's input by a *refusal mark*,
``[refused:<attribute>:hmac-sha256:<key id>:<hex digest>]``, and runs (and records) the job over
that masked input: routing and the agents see the mark where the value was, the memory write is
refused again (now of the mark), and the replay, which re-runs over the recorded input, decides
the same. The digest is keyed (by the ledger's signing key, computed outside the domain) because a
bare SHA-256 of a short secret is found again by trying values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from domain.canonical import canonical_json

MARK_OPENING: Final = "[refused:"
MARK: Final = re.compile(
    r"\[refused:(?P<attribute>[a-z0-9_]+):hmac-sha256:(?P<key_id>[A-Za-z0-9_-]{1,64})"
    r":(?P<digest>[0-9a-f]{64})\]"
)
DIGEST_CONTEXT: Final = b"mace refused value\n"
"""What the keyed digest covers before the attribute and value: no record MAC starts so."""


@dataclass(frozen=True, slots=True)
class RefusedValue:
    """A value a memory write could not store, and the denied attribute that refused it."""

    attribute: str
    text: str

    def digest_message(self) -> bytes:
        return DIGEST_CONTEXT + self.attribute.encode() + b"\n" + self.text.encode()


def value_text(value: Any) -> str:
    """A memory value as text: a string as it is, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value).decode()


def refusal_mark(attribute: str, key_id: str, digest_hex: str) -> str:
    return f"[refused:{attribute}:hmac-sha256:{key_id}:{digest_hex}]"


def is_mark(text: str) -> bool:
    return MARK.fullmatch(text) is not None


def mask(text: str, marks: Mapping[str, str]) -> str:
    """``text`` with every occurrence of each key of ``marks`` replaced by its mark, in one pass.

    Longer values are tried first, so a value that contains another is replaced whole.
    """
    if not marks:
        return text
    pattern = "|".join(re.escape(raw) for raw in sorted(marks, key=lambda s: (-len(s), s)))
    return re.sub(pattern, lambda found: marks[found[0]], text)


def still_holds(text: str, raw: str) -> bool:
    """Whether ``raw`` occurs in ``text`` outside the refusal marks it carries."""
    return raw in MARK.sub("\0", text)
