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

Polynomial shapes are refused too (`polynomial_risk`): repeated parts next to each other (only
parts that may match nothing, or single characters both can take, between them) whose
characters overlap, such as ``a*a*a*b``, ``\\w*\\d*x``, ``.*.*=`` or ``a+a+$``: an input of ``n``
characters can be split between them in ``n**k`` ways, and 800 characters already took 16 s.
Characters are compared as classes, over every code point, so ``\\s*\\d+`` is accepted and
``\\w*\\d*`` is not.

What remains is bounded by a degree (`matching_degree`): each search start costs at most ``n``
to the number of chained repeated parts, and ``re.search`` tries ``n`` starts unless the pattern
is anchored at the start or may match nothing (it then ends at the first). `check_routable`
holds a router to a fixed budget of such steps for the text it routes, so matching time has an
upper bound whatever the rules are, recorded ones (stored before these checks) included.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from functools import cache
from typing import Any, Final

# The regular expression engine's own parser and compiler: typeshed describes them only in part,
# and whether mypy finds ``re._constants`` depended on its cache, so they are typed as Any here.
sre_compile: Any = importlib.import_module("re._compiler")
sre: Any = importlib.import_module("re._constants")
sre_parse: Any = importlib.import_module("re._parser")

_REPEATS = frozenset({sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT})
_CHARACTERS = frozenset({sre.LITERAL, sre.NOT_LITERAL, sre.IN, sre.ANY, sre.CATEGORY})
_NO_WIDTH = frozenset({sre.AT, sre.ASSERT, sre.ASSERT_NOT})

MAX_PATTERN_CHARS: Final = 256
"""The longest router pattern accepted: the analysis below looks at pairs of its parts."""
ROUTING_BUDGET: Final = 10_000_000
"""How many backtracking steps routing one text may cost, summed over a router's rules. Measured
with Python's ``re`` at this count, on 2 loaded cores: the slowest accepted quadratic rule found,
``(\\w|\\d)+$`` on 3,162 digits and a ``!``, takes about 0.4 s (a captured group per repeat
costs more per step than ``\\s+$``, 0.06 s); an exponential shape is held to a few characters
(``^(a+)+$`` to 6)."""
EXPONENTIAL_STEP: Final = 8
"""How many polynomial steps one step of an exponential shape weighs: measured, ``^(a+)+$``
spends about 8 times longer per counted step than ``\\s+$`` does."""
STEP_CHARS: Final = 32
"""How many pattern characters one step may try for its weight (`matching_steps`)."""


def backtracking_risk(pattern: str) -> str | None:
    """What makes ``pattern`` able to backtrack exponentially, or None when its shape cannot.

    ``pattern`` must already compile with ``re``.
    """
    return _risk(sre_parse.parse(pattern), repeated=False)


def polynomial_risk(pattern: str) -> str | None:
    """What makes ``pattern`` able to backtrack in polynomial time of degree 2 or more at one
    search start (repeated parts chained on overlapping characters), or None.

    ``pattern`` must already compile with ``re``.
    """
    parsed = sre_parse.parse(pattern)
    chain, _ = _chain(parsed, [], parsed.state)
    if chain < 2:
        return None
    return f"{chain} repeated parts in a row that can match the same characters"


@cache
def matching_degree(pattern: str) -> int | None:
    """The degree ``d`` of the polynomial ``n**d`` bounding the steps ``re.search`` may take on a
    text of ``n`` characters, or None when the pattern can take exponential time (or is longer
    than `MAX_PATTERN_CHARS`, the most this analysis is run on: a recorded one may be)."""
    if len(pattern) > MAX_PATTERN_CHARS or backtracking_risk(pattern) is not None:
        return None
    parsed = sre_parse.parse(pattern)
    chain, _ = _chain(parsed, [], parsed.state)
    state = parsed.state
    one_start = _anchored(parsed, state.flags) or _always_matches(parsed)
    first = _first_characters(parsed, state.flags)
    # Starts whose repeated parts cannot take the characters a match starts with never scan the
    # same text: ``\\bmy\\s+x`` costs n over all starts, ``\\s+$`` costs n at each.
    apart = first is not None and not _shared(first, _characters(parsed, repeated_only=True), state)
    return chain + (0 if one_start or apart else 1)


def matching_steps(pattern: str, length: int) -> int:
    """The most steps matching ``pattern`` on ``length`` characters is counted to cost.

    A step weighs one more for every `STEP_CHARS` characters of the pattern: a step may try every
    alternative of a long one (``\\w+(?:x00|...|x59)$`` took 1.2 s where ``\\s+$`` took 0.06 s).
    An exponential shape's base is not 2 in general: each of ``k`` alternatives that can match
    alike multiplies the ways by ``k`` (``(a|a|a|a|a|a|a|a)+$`` took 93 s on 10 characters), and a
    backtracking engine has at most one way per pattern position and character, so the pattern's
    length is the base.
    """
    degree = matching_degree(pattern)
    weight = 1 + len(pattern) // STEP_CHARS
    # int ** int is typed as Any (a negative power is a float); these powers are never negative.
    steps: int = (
        EXPONENTIAL_STEP * weight * max(len(pattern), 2) ** min(length + 1, 64)
        if degree is None
        else weight * max(length, 1) ** degree
    )
    return steps


def longest_within(patterns: Sequence[str], budget: int = ROUTING_BUDGET) -> int:
    """The longest text the patterns can all be tried on within ``budget`` steps."""
    low, high = 0, 1
    while sum(matching_steps(p, high) for p in patterns) <= budget:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if sum(matching_steps(p, middle) for p in patterns) <= budget:
            low = middle
        else:
            high = middle
    return low


# A character matched one way by a repeated part, kept with the pattern state to compile it.
_Atom = tuple[Any, Any]
# A repeated part still able to take the next characters: how long its chain is, its characters.
_Open = tuple[int, list[_Atom]]


def _chain(items: Any, open_parts: list[_Open], state: Any) -> tuple[int, list[_Open]]:
    """The longest chain of overlapping repeated parts in ``items`` and the parts still open at
    its end, given the parts open before it."""
    longest = 0
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            inner, _ = _chain(body, [], state)
            longest = max(longest, inner)
            if high <= 1:
                _, after = _chain(body, open_parts, state)
                open_parts = _merged(open_parts, after)
                continue
            characters = _characters(body)
            linked = [n for n, chars in open_parts if _shared(chars, characters, state)]
            length = 1 + max(linked, default=0)
            longest = max(longest, length)
            kept = open_parts if low == 0 else _taking(open_parts, characters, state)
            open_parts = [*kept, (length, characters)]
        elif op in _CHARACTERS:
            open_parts = _taking(open_parts, [(op, av)], state)
        elif op is sre.SUBPATTERN:
            inner, open_parts = _chain(av[3], open_parts, state)
            longest = max(longest, inner)
        elif op is sre.ATOMIC_GROUP:
            inner, open_parts = _chain(av, open_parts, state)
            longest = max(longest, inner)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            # A lookaround consumes nothing, but scans text as it looks: its own chains count.
            inner, _ = _chain(av[1], [], state)
            longest = max(longest, inner)
        elif op is sre.BRANCH:
            joined: list[_Open] = []
            for alternative in av[1]:
                inner, after = _chain(alternative, open_parts, state)
                longest = max(longest, inner)
                joined = _merged(joined, after)
            open_parts = joined
    return longest, open_parts


def _merged(first: list[_Open], second: list[_Open]) -> list[_Open]:
    return [*first, *(part for part in second if part not in first)]


def _taking(open_parts: list[_Open], characters: list[_Atom], state: Any) -> list[_Open]:
    """The open parts that could have taken a character ``characters`` match instead: only
    they can still trade characters with a later repeated part."""
    return [part for part in open_parts if _shared(part[1], characters, state)]


def _characters(items: Any, repeated_only: bool = False) -> list[_Atom]:
    """Every single-character matcher a sequence holds, lookarounds' too (they scan the text they
    look at); with ``repeated_only``, those of parts repeated more than once only."""
    found: list[_Atom] = []
    for op, av in items:
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            found += _characters(av[1], repeated_only)
        elif op in _CHARACTERS and not repeated_only:
            found.append((op, av))
        elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS) and not repeated_only:
            found.append((sre.ANY, None))  # any text a group took: any character
        elif op is sre.BRANCH:
            for alternative in av[1]:
                found += _characters(alternative, repeated_only)
        elif _inner(op, av) is not None:
            repeats = op in _REPEATS and av[1] > 1
            found += _characters(_inner(op, av), repeated_only and not repeats)
    return found


def _shared(first: list[_Atom], second: list[_Atom], state: Any) -> bool:
    """Whether one code point matches a character of ``first`` and one of ``second``."""
    return any(
        _intersect(_code_points(a, state), _code_points(b, state)) for a in first for b in second
    )


_SPANS: dict[tuple[str, int], list[tuple[int, int]]] = {}
"""`_code_points`' answers: each kind of character is looked up over every code point once per
process (a pattern holds few kinds: letters, digits, spaces, classes)."""


def _code_points(atom: _Atom, state: Any) -> list[tuple[int, int]]:
    """The code points ``atom`` matches (under the pattern's flags), as sorted half-open spans."""
    op, av = atom
    if op is sre.LITERAL and not state.flags & sre.SRE_FLAG_IGNORECASE:
        return [(av, av + 1)]
    key = (repr(atom), state.flags)
    if key not in _SPANS:
        one = sre_parse.SubPattern(state, [atom])
        runs = sre_parse.SubPattern(state, [(sre.MAX_REPEAT, (1, sre.MAXREPEAT, one))])
        found = sre_compile.compile(runs, state.flags).finditer(_every_code_point())
        _SPANS[key] = [match.span() for match in found]
    return _SPANS[key]


def _intersect(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> bool:
    i = j = 0
    while i < len(first) and j < len(second):
        (a_start, a_end), (b_start, b_end) = first[i], second[j]
        if a_start < b_end and b_start < a_end:
            return True
        if a_end <= b_end:
            i += 1
        else:
            j += 1
    return False


@cache
def _every_code_point() -> str:
    return "".join(map(chr, range(sys.maxunicode + 1)))


def _anchored(items: Any, flags: int) -> bool:
    """Every match must begin at the text's start: ``re.search`` tries that position only."""
    for op, av in items:
        if op is sre.AT:
            starts = av is sre.AT_BEGINNING_STRING
            return starts or (av is sre.AT_BEGINNING and not flags & sre.SRE_FLAG_MULTILINE)
        if op is sre.SUBPATTERN:
            return _anchored(av[3], flags)
        if op is sre.BRANCH:
            return all(_anchored(alternative, flags) for alternative in av[1])
        return False
    return False


def _first_characters(items: Any, flags: int) -> list[_Atom] | None:
    """The single characters a match may start with, or None when a repeated part (or anything
    this does not follow) may take the first one; a branch anchored at the start adds none."""
    for op, av in items:
        if op is sre.AT and _anchored([(op, av)], flags):
            return []
        if op in _NO_WIDTH:
            continue
        if op in _CHARACTERS:
            return [(op, av)]
        found: list[_Atom] | None = None
        if op is sre.SUBPATTERN and not _always_matches(av[3]):
            found = _first_characters(av[3], flags)
        elif op is sre.BRANCH:
            heads = [_first_characters(alternative, flags) for alternative in av[1]]
            found = None if None in heads else [a for head in heads if head for a in head]
        return found
    return None


def _always_matches(items: Any) -> bool:
    """The sequence matches the empty text wherever it is tried (no assertion that may fail), so
    a search ends at its first start."""
    for op, av in items:
        if op in _REPEATS and (av[0] == 0 or _always_matches(av[2])):
            continue
        if op is sre.SUBPATTERN and _always_matches(av[3]):
            continue
        if op is sre.BRANCH and any(_always_matches(alternative) for alternative in av[1]):
            continue
        return False
    return True


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
