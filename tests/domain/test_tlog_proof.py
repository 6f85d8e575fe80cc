"""The tlog-proof text format (c2sp.org/tlog-proof) and the leaf data its extra line carries.

A proof encodes and parses back to itself, with and without an extra line; every form the spec
does not allow is `InvalidInput` naming what is wrong. Leaf data (`leaf_data`) reads back to the
record it was made from; bytes that cannot be leaf data are refused.
"""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.checkpoint import LeafRecord, leaf_data, parse_leaf_data
from domain.errors import InvalidInput
from domain.tlog_proof import HEADER, MAX_PATH, TlogProof, parse_tlog_proof

ROOT = "A" * 43 + "="
NOTE = f"example.com/log\n5\n{ROOT}\n\n— example.com/log AAAA\n".encode()
HASH = bytes(range(32))
HASH_BASE64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


@given(
    index=st.integers(min_value=0, max_value=2**64 - 1),
    path=st.lists(st.binary(min_size=32, max_size=32), max_size=MAX_PATH),
    extra=st.none() | st.binary(),
)
def test_a_proof_parses_back_to_itself(index: int, path: list[bytes], extra: bytes | None) -> None:
    proof = TlogProof(index, tuple(path), NOTE, extra)
    assert parse_tlog_proof(proof.encoded()) == proof


def test_the_encoding_is_the_specs() -> None:
    proof = TlogProof(7, (HASH,), NOTE, b"entry")
    assert proof.encoded() == (
        f"{HEADER}\nextra ZW50cnk=\nindex 7\n{HASH_BASE64}\n\n".encode() + NOTE
    )
    assert TlogProof(0, (), NOTE).encoded() == f"{HEADER}\nindex 0\n\n".encode() + NOTE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"c2sp.org/tlog-proof@v2\nindex 0\n\n", "the proof's first line is"),
        (f"{HEADER}\nindex 01\n\n".encode(), "'index 01' where its index line goes"),
        (f"{HEADER}\nindex -1\n\n".encode(), "'index -1' where its index line goes"),
        (f"{HEADER}\nindex {2**64}\n\n".encode(), "where its index line goes"),
        (f"{HEADER}\nextra AAAA\n\n".encode(), "nothing where its index line goes"),
        (f"{HEADER}\nextra !!\nindex 0\n\n".encode(), "the proof's extra line is not base64"),
        (f"{HEADER}\nindex 0\nAAAA\n\n".encode(), "hash 1 of the proof's path is not 32 bytes"),
        (
            f"{HEADER}\nindex 0\n{'A' * 43}?\n\n".encode(),
            "hash 1 of the proof's path is not base64",
        ),
        (
            f"{HEADER}\nindex 0\n".encode() + f"{HASH_BASE64}\n".encode() * 65 + b"\n",
            "more than 64 hashes",
        ),
        (f"{HEADER}\nindex 0\n\xe9\n\n".encode(), "the proof's lines are not ASCII"),
    ],
)
def test_a_malformed_proof_is_invalid_input(text: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_tlog_proof(text + NOTE)


def test_a_proof_without_its_empty_line_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="no empty line before its checkpoint"):
        parse_tlog_proof(f"{HEADER}\nindex 0\n".encode())


def test_leaf_data_reads_back_to_its_record() -> None:
    stream = UUID("12345678-1234-5678-1234-567812345678")
    data = leaf_data(stream, 3, "domain.job:Job.Started", b"mace1.k.ff.{}")
    assert parse_leaf_data(data) == LeafRecord(
        stream, 3, "domain.job:Job.Started", b"mace1.k.ff.{}"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes(27), "27 bytes, too short"),
        (bytes(24) + (5).to_bytes(4, "big") + b"abc", "topic length 5 runs past its end"),
        (bytes(24) + (1).to_bytes(4, "big") + b"\xff", "topic is not UTF-8"),
    ],
)
def test_bytes_that_are_no_leaf_data_are_invalid_input(data: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_leaf_data(data)
