"""The one canonical JSON serializer (seed 000 section 4).

Signatures, digests, ids and replay comparisons are all computed over these bytes, so two
runs agree bit for bit only if every value has exactly one encoding. Hence: UTF-8, object keys
sorted by code point, no whitespace, no Unicode normalisation, floats rounded to
``NUMERIC_PRECISION`` decimals (half-even on the float's shortest decimal) and written in
shortest round-trip form, ``-0.0`` written ``0.0``. Whatever has no single faithful encoding
(NaN, infinities, integers beyond signed 64 bits, lone surrogates, bytes, Decimal, datetime,
sets, arbitrary objects) is refused with an error naming its JSONPath, never coerced silently.
"""

import hashlib
import math
import re
from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Context, Decimal, DivisionByZero, InvalidOperation, Overflow
from typing import Any, Final

import orjson

from domain.errors import InvalidInput

NUMERIC_PRECISION: Final = 9
"""Decimal places every float is rounded to before it is written."""

NUMERIC_EPSILON: Final = 1e-9
"""One unit of the last written decimal: the tolerance for comparing decision numbers."""

ORJSON_DEPTH: Final = 250
"""Nesting the fast path hands to orjson (which refuses past 254 levels); deeper values are
written by this module's own encoder, as before it had a fast path."""

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

_QUANTUM: Final = Decimal(1).scaleb(-NUMERIC_PRECISION)
# Every field quantize depends on is pinned, so a caller mutating decimal.DefaultContext cannot
# change our bytes. The precision holds any finite double (309 integer digits) plus the decimals,
# with margin, so quantize never traps whatever value reaches it.
_DECIMAL: Final = Context(
    prec=309 + NUMERIC_PRECISION + 10,
    rounding=ROUND_HALF_EVEN,
    Emin=-999_999,
    Emax=999_999,
    traps=[InvalidOperation, DivisionByZero, Overflow],
)

# One search decides whether a string can be written as is: quote, backslash, C0 control or
# surrogate. Most strings match nothing and take the fast path.
_SPECIAL: Final = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")
_ESCAPES: Final[dict[int, str]] = {
    **{code: f"\\u{code:04x}" for code in range(0x20)},
    ord("\b"): "\\b",
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\f"): "\\f",
    ord("\r"): "\\r",
    ord('"'): '\\"',
    ord("\\"): "\\\\",
}
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CanonicalJSONError(InvalidInput):
    """A value has no canonical encoding; ``path`` says where it sits (``$`` is the root)."""

    def __init__(self, reason: str, path: str) -> None:
        super().__init__(f"{reason} at {path}")
        self.reason = reason
        self.path = path


class _Refusal(Exception):
    """Internal: raised at the offending value, collects path segments while unwinding.

    Building the path only on failure keeps the happy path free of string concatenation.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str | int] = []


class Written:
    """Canonical bytes this module wrote, kept to stand for their value inside a larger one:
    the value is written as these bytes, not walked and encoded again (an event's payload inside
    its stored record). Made only by `write` (and `written`).

    ``exact``: orjson wrote the value as it stands (`_orjson_writes_it_so`: plain JSON types, no
    float to round, no -0.0), so the bytes read back as the value itself (a `Written` member as
    the value of its bytes); False when the canonical form changed something, or may have (the
    module's own encoder wrote it)."""

    __slots__ = ("data", "exact")

    def __init__(self, data: bytes, *, exact: bool = False) -> None:
        self.data = data
        self.exact = exact


def write(obj: object) -> Written:
    """``obj``'s canonical bytes (`canonical_json`), kept."""
    data, exact = _canonical(obj)
    return Written(data, exact=exact)


def written(obj: object) -> tuple[Written, Any]:
    """``obj`` written canonically once: its bytes, kept, and the value they read back as (its
    `canonical_copy`)."""
    kept = write(obj)
    return kept, orjson.loads(kept.data)


def _fragment(obj: object) -> orjson.Fragment:
    """orjson's ``default``: a `Written` value's bytes, as they are (the walk let nothing else
    through)."""
    if type(obj) is Written:
        return orjson.Fragment(obj.data)
    raise TypeError  # pragma: no cover - `_orjson_writes_it_so` passes no other type


def canonical_json(obj: object) -> bytes:
    """Return the canonical UTF-8 bytes of ``obj`` or raise `CanonicalJSONError`.

    A value orjson writes exactly as these rules do, or refuses (`_orjson_writes_it_so`), is
    handed to orjson, several times as fast; anything else (a float it would write otherwise, a
    subclass, a refusal) goes to this module's own encoder, which defines the bytes. A `Written`
    value is its bytes either way.
    """
    return _canonical(obj)[0]


def _canonical(obj: object) -> tuple[bytes, bool]:
    """`canonical_json`'s bytes, and whether orjson wrote them from ``obj`` as it stands
    (`Written.exact`)."""
    if _orjson_writes_it_so(obj):
        try:
            return orjson.dumps(obj, default=_fragment, option=orjson.OPT_SORT_KEYS), True
        except orjson.JSONEncodeError:
            # A key that is not a plain string, a lone surrogate, an integer below signed 64
            # bits, nesting beyond orjson's depth: refused (naming the path) or written below.
            pass
    return encoded(obj), False


def encoded(obj: object) -> bytes:
    """The canonical bytes as this module's own encoder writes them (`canonical_json`)."""
    out: list[str] = []
    try:
        _encode(obj, out)
    except _Refusal as refusal:
        path = "$" + "".join(_segment(part) for part in reversed(refusal.segments))
        raise CanonicalJSONError(refusal.reason, path) from None
    return "".join(out).encode("utf-8")


def _orjson_writes_it_so(obj: Any, depth: int = 0) -> bool:
    """Whether orjson (keys sorted) writes ``obj`` byte for byte as `encoded` does, or refuses
    it: plain dicts, lists and tuples nested at most `ORJSON_DEPTH` deep (orjson refuses deeper;
    this walk's frames stay well within Python's recursion limit) holding plain strings,
    booleans, None, integers up to `INT64_MAX`, floats `_orjson_writes_float_so` and `Written`
    bytes. Subclasses (an enum) and every other type are left to `encoded`: orjson would write
    some of them (a UUID, an enum, an ``orjson.Fragment``) where `encoded` refuses them or
    writes them its own way.

    This walk runs over every value the ledger signs, so it checks only what orjson would get
    wrong. Keys are not looked at: orjson refuses a key that is not a plain string, as it
    refuses a lone surrogate and an integer below `INT64_MIN`, and `canonical_json` then asks
    `encoded`. A member that is a string, boolean, None, integer, `Written` value or empty
    container costs no call, so that the walk costs less than orjson's own writing."""
    kind = type(obj)
    if kind is dict:
        members: Iterable[Any] = obj.values()
    elif kind is list or kind is tuple:
        members = obj
    else:
        members = (obj,)  # a value alone is checked as a member is
    if depth >= ORJSON_DEPTH:
        return False
    for member in members:
        member_kind = type(member)
        if member_kind is str or member_kind is bool or member is None:
            continue
        if member_kind is dict or member_kind is list or member_kind is tuple:
            plain = not member or _orjson_writes_it_so(member, depth + 1)
        elif member_kind is int:
            plain = member <= INT64_MAX
        elif member_kind is float:
            plain = _orjson_writes_float_so(member)
        else:
            plain = member_kind is Written
        if not plain:
            return False
    return True


def _orjson_writes_float_so(value: float) -> bool:
    """A float whose shortest form has no exponent (orjson writes ``1e-7`` where Python writes
    ``1e-07``) and at most `NUMERIC_PRECISION` decimals (nothing to round); not -0.0, which is
    written ``0.0``, nor NaN or an infinity, which are refused."""
    if value == 0.0:
        return math.copysign(1.0, value) > 0
    text = float.__repr__(value)
    return "e" not in text and "n" not in text and len(text.partition(".")[2]) <= NUMERIC_PRECISION


def canonical_copy(obj: object) -> Any:
    """``obj`` as it will read back from storage (floats rounded, tuples as lists).

    Aggregates keep this copy, so the state a live run sees is the state a replay rebuilds.
    """
    return orjson.loads(canonical_json(obj))


def canonical_float(value: float) -> float:
    """``canonical_copy`` of one float, without writing and parsing JSON: a reducer rounds a
    number at every step."""
    try:
        return float(_float_text(value))
    except _Refusal as refusal:
        raise CanonicalJSONError(refusal.reason, "$") from None


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256, the digest format used for every id and content hash."""
    return hashlib.sha256(data).hexdigest()


def digest(obj: object) -> str:
    """Content hash of a JSON value: SHA-256 over its canonical bytes."""
    return sha256_hex(canonical_json(obj))


def _encode(obj: object, out: list[str]) -> None:
    """Append the canonical text of ``obj``; the only recursive step, for objects and arrays."""
    if isinstance(obj, str):
        out.append(_quote(obj, "string"))
    elif isinstance(obj, dict):
        for key in obj:
            if not isinstance(key, str):
                raise _Refusal(f"non-string object key of type {type(key).__name__}")
        out.append("{")
        for position, key in enumerate(sorted(obj)):
            if position:
                out.append(",")
            out.append(_quote(key, "object key"))
            out.append(":")
            try:
                _encode(obj[key], out)
            except _Refusal as refusal:
                refusal.segments.append(key)
                raise
        out.append("}")
    elif isinstance(obj, list | tuple):
        out.append("[")
        for index, item in enumerate(obj):
            if index:
                out.append(",")
            try:
                _encode(item, out)
            except _Refusal as refusal:
                refusal.segments.append(index)
                raise
        out.append("]")
    else:
        out.append(_scalar_text(obj))


def _scalar_text(obj: object) -> str:
    """Text of a non-string scalar; subclasses (e.g. an IntEnum) are written as their base value."""
    if obj is None:
        return "null"
    if type(obj) is Written:
        return obj.data.decode("utf-8")
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        if not INT64_MIN <= obj <= INT64_MAX:
            raise _Refusal("integer outside signed 64-bit range")
        return int.__repr__(obj)
    if isinstance(obj, float):
        return _float_text(obj)
    raise _Refusal(f"unsupported type {type(obj).__name__}")


def _quote(text: str, what: str) -> str:
    """JSON string literal: escape only what JSON requires, everything else raw UTF-8."""
    if _SPECIAL.search(text) is None:
        return f'"{text}"'
    if _SURROGATE.search(text) is not None:
        raise _Refusal(f"{what} with lone surrogate (not encodable as UTF-8)")
    return '"' + text.translate(_ESCAPES) + '"'


def _float_text(value: float) -> str:
    """Round half-even on the shortest decimal, then write the shortest round-trip form.

    Rounding ``Decimal(repr(x))`` rather than the binary value makes ``2.0000000005`` a tie
    that goes to ``2.0``, as a reader of the printed number would expect.
    """
    if not math.isfinite(value):
        raise _Refusal("non-finite float")
    if value == 0.0:
        return "0.0"  # also -0.0
    text = float.__repr__(value)
    if "e+" in text or ("e" not in text and len(text.partition(".")[2]) <= NUMERIC_PRECISION):
        return text  # integral, or at most 9 decimals already: rounding would change nothing
    rounded = float(Decimal(text).quantize(_QUANTUM, context=_DECIMAL))
    return "0.0" if rounded == 0.0 else float.__repr__(rounded)


def _segment(part: str | int) -> str:
    """One JSONPath step: ``[i]``, ``.key``, or ``["key"]`` for keys that are not identifiers."""
    if isinstance(part, int):
        return f"[{part}]"
    if _IDENTIFIER.fullmatch(part) is not None:
        return f".{part}"
    return f"[{_quote(part, 'object key')}]"
