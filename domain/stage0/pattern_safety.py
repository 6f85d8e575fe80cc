"""Which router patterns could make Python's backtracking ``re`` run for exponential time.

A router rule runs on every job's input, in the service, in replay and in audit, so a pattern
whose matching time can double with each character of input is a denial of service for every
tenant. Such patterns are refused when a rule is admitted, by their shape, not by timing them:
a time bound would make a routing decision depend on the machine's speed, and replay must
re-decide exactly what the run decided.

The shapes refused are the ones that give a backtracking engine exponentially many ways to
split one input (the classic ReDoS shapes), judged on the parsed pattern:

- a quantifier that repeats more than once around a part that itself holds such a quantifier
  (``(a+)+``, ``(.*a){20}``);
- a repeated part holding an alternation whose branches may start with the same character or
  match nothing (``(a|a)*``, ``(a|aa)+``, ``(ab|a.)*``);
- a backreference, whose matching is not bounded by any shape check.

Single-character alternations (``(\\w|\\d)+``) parse as one character class and are accepted: a
class matches one character one way. The check is conservative: a pattern refused here may be
harmless, never the reverse for these shapes.
"""

from __future__ import annotations

from re import _constants as sre
from re import _parser as sre_parse
from typing import Any

_REPEATS = frozenset({sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT})


def backtracking_risk(pattern: str) -> str | None:
    """What makes ``pattern`` able to backtrack exponentially, or None when its shape cannot.

    ``pattern`` must already compile with ``re``.
    """
    return _risk(sre_parse.parse(pattern), repeated=False)


def _risk(items: Any, repeated: bool) -> str | None:
    """The first dangerous shape in a parsed sequence; ``repeated`` says an enclosing quantifier
    repeats it more than once."""
    for op, av in items:
        found: str | None = None
        if op in _REPEATS:
            _, most, body = av
            repeats = most > 1
            if repeats and repeated and not _empty_only(body):
                found = "a quantified part inside a repeated group (nested quantifiers)"
            else:
                found = _risk(body, repeated or repeats)
        elif op is sre.BRANCH:
            alternatives = av[1]
            if repeated and _overlap(alternatives):
                found = "alternatives that can match the same text inside a repeated group"
            for alternative in alternatives:
                found = found or _risk(alternative, repeated)
        elif op is sre.SUBPATTERN:
            found = _risk(av[3], repeated)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            found = _risk(av[1], repeated)
        elif op is sre.ATOMIC_GROUP:
            found = _risk(av, repeated)
        elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            found = "a backreference"
        if found is not None:
            return found
    return None


def _empty_only(items: Any) -> bool:
    """The sequence can only match the empty string (assertions, anchors)."""
    return all(op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT) for op, _ in items)


def _overlap(alternatives: list[Any]) -> bool:
    """Two alternatives may start with the same character, or one may match nothing."""
    seen: set[int] = set()
    for alternative in alternatives:
        first, nullable = _first(alternative)
        if nullable or first is None or first & seen:
            return True
        seen |= first
    return False


def _first(items: Any) -> tuple[frozenset[int] | None, bool]:
    """The characters a sequence may start with and whether it may match nothing; None stands for
    "any character" (classes, categories, ``.``)."""
    first: set[int] = set()
    for op, av in items:
        head, nullable = _first_of(op, av)
        if head is None:
            return None, False
        first |= head
        if not nullable:
            return frozenset(first), False
    return frozenset(first), True


def _first_of(op: Any, av: Any) -> tuple[frozenset[int] | None, bool]:
    if op is sre.LITERAL:
        # Both cases, since an inline (?i) may apply: conservative, never misses an overlap.
        char = chr(av)
        return frozenset({av, ord(char.lower()[0]), ord(char.upper()[0])}), False
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return frozenset(), True
    if op is sre.BRANCH:
        heads = [_first(alternative) for alternative in av[1]]
        if any(head is None for head, _ in heads):
            return None, False
        union = frozenset().union(*(head for head, _ in heads if head is not None))
        return union, any(nullable for _, nullable in heads)
    body = _inner(op, av)
    if body is None:
        return None, False
    head, nullable = _first(body)
    return head, nullable or (op in _REPEATS and av[0] == 0)


def _inner(op: Any, av: Any) -> Any:
    """The sequence a group or quantifier holds, or None for anything else."""
    if op in _REPEATS:
        return av[2]
    if op is sre.SUBPATTERN:
        return av[3]
    if op is sre.ATOMIC_GROUP:
        return av
    return None
