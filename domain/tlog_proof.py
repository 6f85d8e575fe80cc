"""Offline proofs that a record is in the log: C2SP ``tlog-proof`` files (c2sp.org/tlog-proof).

A proof is text: the line ``c2sp.org/tlog-proof@v1``; an optional ``extra <base64>`` line; the
line ``index <n>`` (the entry's zero-based position in the log); one base64 SHA-256 hash a line,
the RFC 9162 inclusion path from the leaf's sibling up to the root's child; an empty line; then
the log's checkpoint, a tlog-checkpoint signed note, verbatim (with whatever cosignatures it
carries). The ledger's ``extra`` is the entry itself, `domain.checkpoint.leaf_data` of the
record: the spec's "data necessary to reconstruct the record hash", so that a proof checks on
its own (the leaf hash is SHA-256(0x00 || extra), Go's ``tlog.RecordHash(extra)``). The extra is
not trusted: only a proof whose path leads from its hash to the signed root vouches for it.

This module is the text format alone, pure: checking the note's signatures and the path is the
caller's. Proofs are bytes in and out, so what is checked is exactly what was read.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

from domain.errors import InvalidInput
from domain.merkle import HASH_SIZE

HEADER: Final = "c2sp.org/tlog-proof@v1"
MAX_PATH: Final = 64
"""An inclusion path has one hash per level of a tree below 2**64 entries."""
EXPECTED_PROOF: Final = (
    f"expected a tlog-proof: the line {HEADER}, an optional 'extra <base64>' line, 'index <n>',"
    " one base64 hash a line, an empty line, then the checkpoint's signed note"
)
_INDEX: Final = re.compile(r"index (0|[1-9][0-9]{0,19})")


@dataclass(frozen=True)
class TlogProof:
    """An entry's index, its inclusion path, the extra data (None: no extra line) and the
    checkpoint note (bytes, its signatures not checked)."""

    index: int
    path: tuple[bytes, ...]
    note: bytes
    extra: bytes | None = None

    def encoded(self) -> bytes:
        lines = [HEADER]
        if self.extra is not None:
            lines.append(f"extra {base64.b64encode(self.extra).decode()}")
        lines.append(f"index {self.index}")
        lines += [base64.b64encode(node).decode() for node in self.path]
        return ("\n".join(lines) + "\n\n").encode() + self.note


def parse_tlog_proof(data: bytes) -> TlogProof:
    """The proof ``data`` encodes, nothing checked but its form; `InvalidInput` naming what is
    malformed otherwise."""
    head, blank, note = data.partition(b"\n\n")
    if not blank:
        raise InvalidInput(f"the proof has no empty line before its checkpoint: {EXPECTED_PROOF}")
    try:
        lines = head.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise InvalidInput(f"the proof's lines are not ASCII: {EXPECTED_PROOF}") from None
    if lines[0] != HEADER:
        raise InvalidInput(f"the proof's first line is {lines[0][:40]!r}: {EXPECTED_PROOF}")
    extra = None
    rest = lines[1:]
    if rest and rest[0].startswith("extra "):
        extra = _base64(rest[0][len("extra ") :], "the proof's extra line")
        rest = rest[1:]
    index = _INDEX.fullmatch(rest[0]) if rest else None
    if index is None or int(index.group(1)) >= 2**64:
        found = repr(rest[0][:40]) if rest else "nothing"
        raise InvalidInput(f"the proof has {found} where its index line goes: {EXPECTED_PROOF}")
    if len(rest) - 1 > MAX_PATH:
        raise InvalidInput(f"the proof's path has more than {MAX_PATH} hashes")
    path = tuple(_hash(line, number) for number, line in enumerate(rest[1:], start=1))
    return TlogProof(int(index.group(1)), path, note, extra)


def _hash(line: str, number: int) -> bytes:
    node = _base64(line, f"hash {number} of the proof's path")
    if len(node) != HASH_SIZE:
        raise InvalidInput(f"hash {number} of the proof's path is not {HASH_SIZE} bytes")
    return node


def _base64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{what} is not base64: {EXPECTED_PROOF}") from None
