"""The one parser for JSON users hand in: command-line values, snapshot and mock files, run lines.

A value is accepted exactly when it can be stored as given. orjson cannot be that parser: it
reads an integer beyond 64 bits as a float (``123456789012345678901234567890`` becomes
``1.2345678901234568e+29``), a lossy value the canonical serializer would then store without
complaint. Python's ``json`` reads every integer exactly (and NaN, Infinity, overflowing floats
as non-finite floats); the canonical serializer's own rules then refuse, naming the JSONPath of
the value, what it could not write faithfully: integers outside signed 64 bits, non-finite
numbers, lone surrogates. An object naming one key twice is refused too: RFC 8259 leaves its
meaning to each parser (many keep the last pair, others refuse it or report both), so what it
says depends on who reads it, and nothing can be stored as given. The HTTP service holds bodies
to the serializer's rules (its bodies are checked by the canonical serializer too).
"""

from __future__ import annotations

import json
from typing import Any, Final

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import InvalidInput

_INT64_DIGITS: Final = len(str(-(2**63)))
_BEYOND_INT64: Final = 2**64


def _integer(literal: str) -> int:
    """An integer literal as its exact value. A literal longer than any signed 64-bit integer is
    out of range whatever its digits, so it is not converted (thousands of digits cost quadratic
    time, or Python refuses them): it stands for a value out of range, which is then refused."""
    return int(literal) if len(literal) <= _INT64_DIGITS else _BEYOND_INT64


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict; JSONInputError naming the first key given twice."""
    members: dict[str, Any] = {}
    for key, value in pairs:
        if key in members:
            msg = f"key {key!r} appears twice in one object: each key may appear once"
            raise JSONInputError(msg)
        members[key] = value
    return members


class JSONInputError(InvalidInput):
    """JSON holding a value that cannot be stored as given; the message names it and its path."""


class NotJSONError(JSONInputError):
    """Input that is not JSON at all (or not UTF-8); the message starts with "not"."""


def repeated_key(raw: bytes) -> str | None:
    """Why a JSON text cannot be read as one value because an object names a key twice (the HTTP
    service's bodies, which its framework reads keeping the last pair); None when no object does,
    or when it is not JSON at all (its reader says what is wrong with it then)."""
    try:
        json.loads(raw, parse_int=_integer, object_pairs_hook=_object)
    except JSONInputError as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None
    return None


def parse_json_input(raw: bytes | str) -> Any:
    """The JSON value ``raw`` holds (UTF-8 when bytes), or JSONInputError saying what is wrong."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text, parse_int=_integer, object_pairs_hook=_object)
    except JSONInputError:
        raise  # a key given twice (`_object`): JSON, but not one value
    except UnicodeDecodeError as exc:
        msg = f"not UTF-8 text: byte {exc.start} cannot be decoded"
        raise NotJSONError(msg) from None
    except RecursionError:
        raise NotJSONError("not JSON: nested too deeply") from None
    except ValueError as exc:
        raise NotJSONError(f"not JSON: {exc}") from None
    try:
        canonical_json(value)
    except CanonicalJSONError as exc:
        raise JSONInputError(str(exc)) from None
    except RecursionError:
        raise JSONInputError("nested too deeply to be stored") from None
    return value
