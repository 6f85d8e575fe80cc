"""The signed-note and tlog-checkpoint text format (`domain.checkpoint_note`): known answers from
the specifications and from Go's verifier, then refusals.

Known answers:
- ``c2sp.org/signed-note``: the verifier key ``example.com/foo+530d903a+...`` and the note it
  verifies ("This is an example message.");
- Go's ``golang.org/x/mod/sumdb/note`` package documentation: the ``PeterNeumann`` signer key
  (its Ed25519 seed), verifier key and signed note, and the note cosigned by ``EnochRoot``;
- ``c2sp.org/tlog-checkpoint`` and ``c2sp.org/tlog-cosignature``: the checkpoint of
  ``example.com/behind-the-sofa`` at size 20852163, alone and with a witness's cosignature.
"""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given
from hypothesis import strategies as st

from domain.checkpoint_note import (
    CheckpointBody,
    NoteSignature,
    SignedNote,
    VerifierKey,
    parse_checkpoint_text,
    parse_note,
    parse_vkey,
)
from domain.errors import InvalidInput

SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n"
    "\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuw"
    "HjG1Yu72IneyaQM=\n"
).encode()

GO_SEED = base64.b64decode("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")[1:]
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_SIGNATURE = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZ"
    "b6KE6RyyBwJnAM=\n"
)
GO_COSIGNATURE = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWL"
    "ox33WWd1RvMc+QQ=\n"
)

CHECKPOINT_TEXT = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)
LOG_SIGNATURE = (
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5"
    "/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)
WITNESS_COSIGNATURE = (
    "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJs"
    "X3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)


def verifies(vkey: VerifierKey, note: SignedNote) -> bool:
    key = Ed25519PublicKey.from_public_bytes(vkey.public_key)
    for signature in note.signatures:
        if signature.by(vkey):
            key.verify(signature.signature, note.text.encode())
            return True
    return False


def test_the_signed_note_specs_vkey_verifies_its_example_note() -> None:
    vkey = parse_vkey(SPEC_VKEY)
    assert (vkey.name, vkey.key_id.hex(), vkey.signature_type) == ("example.com/foo", "530d903a", 1)
    assert vkey.encoded() == SPEC_VKEY
    note = parse_note(SPEC_NOTE)
    assert note.text == "This is an example message.\n"
    assert verifies(vkey, note)
    assert note.encoded() == SPEC_NOTE


def test_signing_as_go_does_gives_gos_documented_vkey_and_note_byte_for_byte() -> None:
    """Ed25519 is deterministic: the same seed and text give Go's own signature line."""
    private = Ed25519PrivateKey.from_private_bytes(GO_SEED)
    public = private.public_key().public_bytes_raw()
    vkey = VerifierKey.ed25519("PeterNeumann", public)
    assert vkey.encoded() == GO_VKEY
    signed = SignedNote(
        GO_TEXT, (NoteSignature(vkey.name, vkey.key_id, private.sign(GO_TEXT.encode())),)
    )
    assert signed.encoded() == f"{GO_TEXT}\n{GO_SIGNATURE}".encode()
    assert verifies(parse_vkey(GO_VKEY), parse_note(signed.encoded()))


def test_a_cosigned_note_keeps_every_line_and_each_key_finds_its_own() -> None:
    data = f"{GO_TEXT}\n{GO_SIGNATURE}{GO_COSIGNATURE}".encode()
    note = parse_note(data)
    assert [signature.name for signature in note.signatures] == ["PeterNeumann", "EnochRoot"]
    assert note.encoded() == data
    assert verifies(parse_vkey(GO_VKEY), note)
    first = parse_note(f"{GO_TEXT}\n{GO_SIGNATURE}".encode())
    assert first.signed_by(note.signatures[1]) == note


def test_the_tlog_checkpoint_example_parses_and_a_witness_line_appends() -> None:
    body = parse_checkpoint_text(CHECKPOINT_TEXT)
    assert (body.origin, body.tree_size) == ("example.com/behind-the-sofa", 20852163)
    assert base64.b64encode(body.root).decode() == "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
    assert body.text() == CHECKPOINT_TEXT
    logged = parse_note(f"{CHECKPOINT_TEXT}\n{LOG_SIGNATURE}".encode())
    cosigned = parse_note(f"{CHECKPOINT_TEXT}\n{LOG_SIGNATURE}{WITNESS_COSIGNATURE}".encode())
    assert logged.signed_by(cosigned.signatures[1]) == cosigned
    # A timestamped cosignature: 8 bytes of time, then the 64-byte Ed25519 signature.
    assert len(cosigned.signatures[1].signature) == 8 + 64


def test_an_empty_tree_is_size_0() -> None:
    text = f"log.example/x\n0\n{base64.b64encode(bytes(32)).decode()}\n"
    assert parse_checkpoint_text(text).tree_size == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a\n1\n", "fewer than three lines"),
        ("a\n1\nAA==\nextra\n", "extension lines"),
        (
            "a\n01\n" + base64.b64encode(bytes(32)).decode() + "\n",
            "tree size '01' is not a decimal",
        ),
        (
            "a\n-1\n" + base64.b64encode(bytes(32)).decode() + "\n",
            "tree size '-1' is not a decimal",
        ),
        ("a\n1\n" + base64.b64encode(bytes(31)).decode() + "\n", "is not 32 bytes of base64"),
        (f"a\n{2**64}\n" + base64.b64encode(bytes(32)).decode() + "\n", "not a decimal below"),
        ("\n1\n" + base64.b64encode(bytes(32)).decode() + "\n", "origin '' is empty"),
        ("a b\n1\n" + base64.b64encode(bytes(32)).decode() + "\n", "origin 'a b' holds a space"),
        ("a\n1\n" + base64.b64encode(bytes(32)).decode(), "fewer than three lines"),
    ],
    ids=[
        "short",
        "extension",
        "zero-led",
        "negative",
        "short-root",
        "too-large",
        "no-origin",
        "space",
        "no-nl",
    ],
)
def test_a_text_that_is_no_checkpoint_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_checkpoint_text(text)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"text\n\n", "the note's last line does not end|does not start"),
        (b"text\n\xe2\x80\x94 a AAAAAAAA\n", "no blank line before its signatures"),
        (b"text\n\n\xe2\x80\x94 a AAAA\n", "shorter than a key id and a signature"),
        (b"text\n\n\xe2\x80\x94 a AAAAAAAA", "does not end in a newline"),
        (b"text\n\n\xe2\x80\x94 a AAAAAAAA\n\n", "ends in a blank line, a newline too many"),
        (b"te\x00xt\n\n\xe2\x80\x94 a AAAAAAAA\n", "control character"),
        (b"text\n\n\xe2\x80\x94 a+b AAAAAAAA\n", "key name 'a\\+b' holds a '\\+'"),
    ],
    ids=[
        "no-signature",
        "no-blank",
        "short",
        "no-final-newline",
        "a-newline-too-many",
        "nul",
        "plus",
    ],
)
def test_a_malformed_note_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_note(data)


def test_more_signature_lines_than_the_limit_are_refused() -> None:
    line = f"— a {base64.b64encode(bytes(9)).decode()}\n"
    assert len(parse_note(("t\n\n" + line * 100).encode()).signatures) == 100
    with pytest.raises(InvalidInput, match="more than 100 signature lines"):
        parse_note(("t\n\n" + line * 101).encode())


NAMES = st.text(
    st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs"), blacklist_characters="+"),
    min_size=1,
    max_size=20,
).filter(lambda name: not any(char.isspace() for char in name))


@given(
    NAMES,
    st.integers(0, 2**63 - 1),
    st.binary(min_size=32, max_size=32),
    st.lists(
        st.tuples(NAMES, st.binary(min_size=4, max_size=4), st.binary(min_size=1)), max_size=5
    ),
)
def test_every_checkpoint_note_reads_back_as_written(
    origin: str, size: int, root: bytes, lines: list[tuple[str, bytes, bytes]]
) -> None:
    body = CheckpointBody(origin, size, root)
    signatures = tuple(NoteSignature(*line) for line in [(origin, b"\x00" * 4, b"s"), *lines])
    note = SignedNote(body.text(), signatures)
    assert parse_note(note.encoded()) == note
    assert parse_checkpoint_text(note.text) == body
