"""Golden bytes and properties of the canonical serializer.

Signatures and replay equality are computed over these bytes, so the tests pin exact output:
any change here is a format change that breaks every stored signature.
"""

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum, IntEnum, StrEnum
from typing import Any
from uuid import UUID

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain import canonical
from domain.canonical import (
    NUMERIC_EPSILON,
    NUMERIC_PRECISION,
    CanonicalJSONError,
    canonical_copy,
    canonical_float,
    canonical_json,
    digest,
    encoded,
    sha256_hex,
    write,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FINITE_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | INT64 | FINITE_FLOATS | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def test_constants_follow_seed_000() -> None:
    assert NUMERIC_PRECISION == 9
    assert NUMERIC_EPSILON == 1e-9


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": {"d": [3, 2, 1], "c": None}}, b'{"a":{"c":null,"d":[3,2,1]},"b":1}'),
        (
            {"é": 1, "z": 2, "Z": 3, "_": 4, "aa": 5, "a": 6},
            '{"Z":3,"_":4,"a":6,"aa":5,"z":2,"é":1}',
        ),
        ({"\U0001f600": 1, "\uffff": 2}, '{"\uffff":2,"\U0001f600":1}'),  # code point, not UTF-16
        ({}, b"{}"),
        ([], b"[]"),
        ([{}, [], [[]]], b"[{},[],[[]]]"),
        ((1, (2, "x")), b'[1,[2,"x"]]'),
        (True, b"true"),
        (False, b"false"),
        (None, b"null"),
        ([True, False, None, 0, 1], b"[true,false,null,0,1]"),
        (2**63 - 1, b"9223372036854775807"),
        (-(2**63), b"-9223372036854775808"),
        (-0, b"0"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_golden_structures(value: object, expected: bytes | str) -> None:
    want = expected.encode() if isinstance(expected, str) else expected
    assert canonical_json(value) == want


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("é", '"é"'.encode()),
        ("日本", b'"\xe6\x97\xa5\xe6\x9c\xac"'),
        ("😀", b'"\xf0\x9f\x98\x80"'),
        ("\u2028\u2029", b'"\xe2\x80\xa8\xe2\x80\xa9"'),
        ("e\u0301", b'"e\xcc\x81"'),  # no normalisation: stays decomposed
        ('q"b\\s/', b'"q\\"b\\\\s/"'),
        ("\b\t\n\f\r", b'"\\b\\t\\n\\f\\r"'),
        ("\x00\x01\x1b\x1f", b'"\\u0000\\u0001\\u001b\\u001f"'),
        ("\x7f", b'"\x7f"'),
        ("plain ascii", b'"plain ascii"'),
        ("", b'""'),
    ],
    ids=ascii,
)
def test_golden_strings(value: str, expected: bytes) -> None:
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.1 + 0.2, b"0.3"),
        (1e-10, b"0.0"),
        (-0.0, b"0.0"),
        (0.0, b"0.0"),
        (-1e-12, b"0.0"),
        (5e-10, b"0.0"),  # half-even: the tie goes to the even 0
        (1.5e-9, b"2e-09"),  # half-even: the tie goes to the even 2
        (1e-9, b"1e-09"),
        (1.5e-07, b"1.5e-07"),
        (2.5000000004, b"2.5"),
        (2.0000000005, b"2.0"),
        (2.0000000015, b"2.000000002"),
        (-2.0000000005, b"-2.0"),
        (0.1234567891234, b"0.123456789"),
        (2.5, b"2.5"),
        (3.0, b"3.0"),
        (123.0, b"123.0"),
        (1e20, b"1e+20"),
        (1e16, b"1e+16"),
        (-1e20, b"-1e+20"),
        (123456789.123456789, b"123456789.12345679"),
        (1.7976931348623157e308, b"1.7976931348623157e+308"),
        (5e-324, b"0.0"),
    ],
    ids=repr,
)
def test_golden_floats(value: float, expected: bytes) -> None:
    assert canonical_json(value) == expected


def test_golden_document_and_digest() -> None:
    document = {
        "z": [0.1 + 0.2, -0.0, 1e20, (1, "é")],
        "a": {"y": "\u2028", "x": True, "w": None},
    }
    expected = '{"a":{"w":null,"x":true,"y":"\u2028"},"z":[0.3,0.0,1e+20,[1,"é"]]}'.encode()
    assert canonical_json(document) == expected
    assert digest(document) == sha256_hex(expected)
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _test_id(value: object) -> str:
    # No memory addresses in ids: parallel workers must collect the same tests.
    return re.sub(r" at 0x[0-9a-f]+", "", ascii(value))[:40]


@pytest.mark.parametrize(
    ("value", "message", "path"),
    [
        ({"a": [0, 1, {"b": float("nan")}]}, "non-finite float at $.a[2].b", "$.a[2].b"),
        ({"a b": [float("inf")]}, 'non-finite float at $["a b"][0]', '$["a b"][0]'),
        ([float("-inf")], "non-finite float at $[0]", "$[0]"),
        (float("nan"), "non-finite float at $", "$"),
        ({"x": 2**63}, "integer outside signed 64-bit range at $.x", "$.x"),
        ([-(2**63) - 1], "integer outside signed 64-bit range at $[0]", "$[0]"),
        ({"k": {1: "v"}}, "non-string object key of type int at $.k", "$.k"),
        ({"_ok9": {"é": b"x"}}, 'unsupported type bytes at $._ok9["é"]', '$._ok9["é"]'),
        ({'q"\\': Decimal("1.5")}, 'unsupported type Decimal at $["q\\"\\\\"]', '$["q\\"\\\\"]'),
        (
            {"9a": datetime(2020, 1, 1, tzinfo=UTC)},
            'unsupported type datetime at $["9a"]',
            '$["9a"]',
        ),
        ([[{1, 2}]], "unsupported type set at $[0][0]", "$[0][0]"),
        ({"o": object()}, "unsupported type object at $.o", "$.o"),
        (
            {"s": ["ok", "\ud800"]},
            "string with lone surrogate (not encodable as UTF-8) at $.s[1]",
            "$.s[1]",
        ),
        (
            {"m": {"\udc00": 1}},
            "object key with lone surrogate (not encodable as UTF-8) at $.m",
            "$.m",
        ),
        ("\ud83d\ude00", "string with lone surrogate (not encodable as UTF-8) at $", "$"),
    ],
    ids=_test_id,
)
def test_refusals_name_the_path(value: object, message: str, path: str) -> None:
    with pytest.raises(CanonicalJSONError) as caught:
        canonical_json(value)
    assert str(caught.value) == message
    assert caught.value.path == path
    assert isinstance(caught.value, ValueError)


def test_boundary_integers() -> None:
    assert canonical_json([2**63 - 1, -(2**63)]) == b"[9223372036854775807,-9223372036854775808]"
    with pytest.raises(CanonicalJSONError, match=r"at \$$"):
        canonical_json(2**63)


def _shuffled(value: Any, data: st.DataObject) -> Any:
    """The same JSON value with every object rebuilt in a drawn insertion order."""
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {key: _shuffled(value[key], data) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, data) for item in value]
    return value


def _whitespace_outside_strings(encoded: bytes) -> list[int]:
    """Offsets of JSON whitespace bytes outside string literals.

    Multi-byte UTF-8 sequences only use bytes >= 0x80, so a byte-level scan that tracks string
    literals (a quote not preceded by an escaping backslash toggles them) is exact.
    """
    found: list[int] = []
    in_string = False
    escaped = False
    for offset, byte in enumerate(encoded):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b" \t\n\r":
            found.append(offset)
    return found


@given(JSON_VALUES, st.data())
def test_insertion_order_does_not_matter(value: Any, data: st.DataObject) -> None:
    assert canonical_json(_shuffled(value, data)) == canonical_json(value)


@given(JSON_VALUES)
def test_idempotent_through_a_parser(value: Any) -> None:
    encoded = canonical_json(value)
    assert canonical_json(orjson.loads(encoded)) == encoded
    assert canonical_json(json.loads(encoded)) == encoded


@given(JSON_VALUES)
def test_output_is_utf8_json_without_whitespace(value: Any) -> None:
    encoded = canonical_json(value)
    json.loads(encoded.decode("utf-8", errors="strict"))
    assert _whitespace_outside_strings(encoded) == []
    assert not any(byte < 0x20 for byte in encoded)  # control characters are always escaped


def test_whitespace_scanner_sees_through_strings() -> None:
    assert _whitespace_outside_strings(b'{"a b":"\\" x"}') == []
    assert _whitespace_outside_strings(b'{"a": 1}') == [5]


@given(FINITE_FLOATS | st.sampled_from([2.0000000005, 1e-10, -1e-10, -0.0, 1e16, 0.1 + 0.2]))
def test_a_float_rounded_alone_is_the_float_read_back_from_its_canonical_bytes(
    value: float,
) -> None:
    rounded = canonical_float(value)
    assert math.copysign(1.0, rounded) == math.copysign(1.0, canonical_copy(value))
    assert rounded == canonical_copy(value)
    assert canonical_json(rounded) == canonical_json(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_float_rounded_alone_is_refused_as_the_serializer_refuses_it(value: float) -> None:
    with pytest.raises(CanonicalJSONError, match=r"^non-finite float at \$$"):
        canonical_float(value)


@given(FINITE_FLOATS)
def test_rounding_is_stable(value: float) -> None:
    rounded = float(canonical_json(value))
    assert canonical_json(rounded) == canonical_json(value)
    assert float(canonical_json(rounded)) == rounded
    assert math.isclose(rounded, value, rel_tol=0.0, abs_tol=NUMERIC_EPSILON / 2 + math.ulp(value))


# Two encoders write these bytes: orjson where it writes exactly what the rules say, the
# module's own everywhere else. They must never disagree.

SHORT_DECIMALS = st.decimals(
    min_value=-(10**12), max_value=10**12, places=4, allow_nan=False, allow_infinity=False
).map(float)


@given(
    st.recursive(
        st.none() | st.booleans() | INT64 | FINITE_FLOATS | SHORT_DECIMALS | st.text(),
        lambda children: (
            st.lists(children, max_size=5)
            | st.tuples(children, children)
            | st.dictionaries(st.text(max_size=8), children, max_size=5)
        ),
        max_leaves=30,
    )
)
def test_the_fast_path_writes_what_the_encoder_writes(value: Any) -> None:
    assert canonical_json(value) == encoded(value)


class Colour(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


@pytest.mark.parametrize(
    "value",
    [
        1e-5,
        1e-7,
        -1e-9,
        1e16,
        1e22,
        -0.0,
        [0.0, -0.0],
        0.1 + 0.2,
        2.0000000005,
        123456789.123456789,
        2**63 - 1,
        -(2**63),
        {"é": 1, "\uffff": 2, "😀": 3, "z": 4},
        '\x00\x1f\x7f\u2028\\"',
        [Colour.RED, Level.HIGH],
        {"nested": [[[[[[[[[[[]]]]]]]]]]]},
    ],
)
def test_the_fast_path_leaves_what_orjson_writes_otherwise_to_the_encoder(value: Any) -> None:
    assert canonical_json(value) == encoded(value)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": ["ok", "\ud800"]}, "$.a[1]"),
        ([2**63], "$[0]"),
        ([2**64 - 1], "$[0]"),
        ({"id": UUID(int=1)}, "$.id"),
        ({"at": datetime(2026, 1, 1, tzinfo=UTC)}, "$.at"),
        ({"n": math.nan}, "$.n"),
    ],
)
def test_what_orjson_would_take_is_still_refused_with_its_path(value: Any, path: str) -> None:
    with pytest.raises(CanonicalJSONError) as refused:
        canonical_json(value)
    assert refused.value.path == path


@pytest.mark.parametrize("depth", [249, 250, 251, 600, 900])
def test_deep_nesting_is_written_as_the_encoder_writes_it(depth: int) -> None:
    """orjson stops at 254 levels, and the check before it must not run out of stack first:
    values nested as deep as the encoder takes are still written, the same bytes."""
    nested: Any = "leaf"
    for level in range(depth):
        nested = [nested] if level % 2 else {"k": nested}
    assert canonical_json(nested) == encoded(nested)


# The fast path hands orjson whatever it writes as the rules say or refuses; everything else
# goes to the encoder. Whatever a value holds, the two give the same bytes or the same refusal.


class Shade(Enum):
    DARK = "dark"  # orjson writes a plain enum as its value; the rules refuse it


class Label(str):
    pass


def _refused_or_written(encode: Callable[[object], bytes], value: object) -> object:
    """What ``encode`` makes of ``value``: its bytes, or its refusal's message and path."""
    try:
        return encode(value)
    except CanonicalJSONError as refused:
        return ("refused", str(refused), refused.path)


ROUNDING_EDGES = st.sampled_from(
    [
        2.0000000005,
        2.0000000015,
        -2.0000000005,
        5e-10,
        1.5e-9,
        1e-9,
        0.1 + 0.2,
        123456789.123456789,
        1e-4,
        math.nextafter(1e-4, 0.0),
        -1e-4,
        1e16,
        math.nextafter(1e16, 0.0),
        -1e16,
        5e-324,
        1.7976931348623157e308,
        0.0,
        -0.0,
    ]
)
INT64_EDGES = st.sampled_from(
    [2**53, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, -(2**64), -(2**64) - 1]
)
# Values orjson writes (a UUID, enums, a fragment, a str subclass) or refuses, none of them
# plain JSON: the encoder decides each.
EXOTIC = st.sampled_from(
    [
        UUID(int=7),
        Shade.DARK,
        Colour.RED,
        Level.HIGH,
        orjson.Fragment(b"1"),
        Label("label"),
        Decimal("1.5"),
        b"x",
        frozenset(),
        datetime(2026, 1, 1, tzinfo=UTC),
    ]
)
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)
KEYS: st.SearchStrategy[Any] = (
    st.text(max_size=8)
    | ANY_TEXT
    | st.sampled_from([1, True, None, Colour.RED, Label("key"), "\ud800"])
)
ANY_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | INT64
    | INT64_EDGES
    | st.integers()
    | st.floats()
    | ROUNDING_EDGES
    | SHORT_DECIMALS
    | st.text()
    | ANY_TEXT
    | EXOTIC
    | st.builds(write, JSON_VALUES),
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(KEYS, children, max_size=5)
    ),
    max_leaves=30,
)


@given(ANY_VALUES)
def test_the_fast_path_writes_and_refuses_what_the_encoder_does(value: Any) -> None:
    assert _refused_or_written(canonical_json, value) == _refused_or_written(encoded, value)


@given(
    st.dictionaries(
        st.text(st.characters(min_codepoint=0xE000), min_size=1),
        st.integers(0, 9),
    )
)
def test_keys_are_sorted_by_code_point_not_utf16(value: dict[str, int]) -> None:
    """UTF-16 sorts a character above U+FFFF (a surrogate pair, D800-DFFF) before U+E000 to
    U+FFFF; code points sort it after."""
    expected = "{" + ",".join(f'"{key}":{value[key]}' for key in sorted(value)) + "}"
    assert canonical_json(value) == expected.encode()


@given(
    st.recursive(
        st.sampled_from([math.nan, math.inf, -math.inf]),
        lambda children: (
            st.lists(children, min_size=1, max_size=3)
            | st.dictionaries(st.text(max_size=4), children, min_size=1, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_a_non_finite_float_at_any_depth_is_refused_naming_its_path(value: Any) -> None:
    with pytest.raises(CanonicalJSONError) as refused:
        canonical_json(value)
    assert refused.value.reason == "non-finite float"
    assert _refused_or_written(encoded, value) == (
        "refused",
        str(refused.value),
        refused.value.path,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({Colour.RED: 1, "a": 2}, b'{"a":2,"red":1}'),
        ({Label("k"): [1]}, b'{"k":[1]}'),
        ([Label("s"), Level.HIGH], b'["s",3]'),
        ({"w": write({"b": [1.5], "a": None})}, b'{"w":{"a":null,"b":[1.5]}}'),
        (write([1, "x"]), b'[1,"x"]'),
    ],
    ids=_test_id,
)
def test_keys_and_values_orjson_will_not_take_are_written_by_the_encoder(
    value: Any, expected: bytes
) -> None:
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": {True: 1}}, "non-string object key of type bool at $.a"),
        ([{None: 1}], "non-string object key of type NoneType at $[0]"),
        ({"n": [-(2**63) - 1]}, "integer outside signed 64-bit range at $.n[0]"),
        ({"n": (2**63,)}, "integer outside signed 64-bit range at $.n[0]"),
        (-(2**63) - 1, "integer outside signed 64-bit range at $"),
        (2**64 - 1, "integer outside signed 64-bit range at $"),
        ({"u": UUID(int=7)}, "unsupported type UUID at $.u"),
        ([Shade.DARK], "unsupported type Shade at $[0]"),
        ({"f": orjson.Fragment(b"1")}, "unsupported type Fragment at $.f"),
        ({"k": {"\udfff": "v"}}, "object key with lone surrogate (not encodable as UTF-8) at $.k"),
    ],
    ids=_test_id,
)
def test_what_the_fast_path_lets_orjson_refuse_is_refused_as_the_encoder_refuses_it(
    value: Any, message: str
) -> None:
    with pytest.raises(CanonicalJSONError) as refused:
        canonical_json(value)
    assert str(refused.value) == message


def test_the_check_before_orjson_calls_itself_only_for_non_empty_containers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check runs over every value the ledger signs (issue 29): a string, boolean, None,
    integer, `Written` value or empty container inside a value costs it no call, a float one
    look, and a value it passes is written by orjson alone."""
    inner = {"apt": 0.5, "node": "n1"}
    nested = [inner, "x", 7]
    value = {
        "text": "é",
        "count": 2**63 - 1,
        "low": -(2**63),
        "flag": False,
        "none": None,
        "empty": [],
        "nothing": {},
        "kept": write({"z": 1}),  # written before the counting starts
        "nested": nested,
    }
    entered: list[object] = []
    floats: list[float] = []
    walk = canonical._orjson_writes_it_so
    looks_at = canonical._orjson_writes_float_so

    def counted_walk(obj: Any, depth: int = 0) -> bool:
        entered.append(obj)
        return walk(obj, depth)

    def counted_float(value: float) -> bool:
        floats.append(value)
        return looks_at(value)

    def not_expected(obj: object) -> bytes:
        raise AssertionError(f"written by the encoder: {obj!r}")

    monkeypatch.setattr(canonical, "_orjson_writes_it_so", counted_walk)
    monkeypatch.setattr(canonical, "_orjson_writes_float_so", counted_float)
    monkeypatch.setattr(canonical, "encoded", not_expected)
    assert canonical_json(value) == (
        b'{"count":9223372036854775807,"empty":[],"flag":false,"kept":{"z":1},'
        b'"low":-9223372036854775808,"nested":[{"apt":0.5,"node":"n1"},"x",7],"none":null,'
        b'"nothing":{},"text":"\xc3\xa9"}'
    )
    assert entered == [value, nested, inner]
    assert floats == [0.5]
