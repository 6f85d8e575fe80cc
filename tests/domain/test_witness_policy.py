"""Witness policy files and tlog-cosignature v1 checks, pure (`domain.witness_policy`,
`domain.cosignature`)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.witness_server import SpecWitness

from domain.checkpoint_note import CheckpointBody, NoteSignature, VerifierKey
from domain.cosignature import cosignature_problem, cosigned_message, timestamped
from domain.errors import InvalidInput
from domain.merkle import EMPTY_ROOT, root
from domain.witness_policy import parse_witness_policy

LOG = VerifierKey.ed25519("ledger.example/log", b"\x01" * 32)
TEXT = CheckpointBody("ledger.example/log", 7, b"\x02" * 32).text()


def test_the_signed_message_is_the_spec_s_header_time_line_and_note_text() -> None:
    assert cosigned_message(TEXT, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\nledger.example/log\n7\n"
        + TEXT.split("\n")[2].encode()
        + b"\n"
    )


def test_a_cosignature_verifies_only_for_its_key_its_text_and_a_real_time() -> None:
    w = SpecWitness("witness.example/w1")
    line = w.cosign(TEXT, timestamp=1679315147)
    assert cosignature_problem(TEXT, line, w.vkey) is None
    held = timestamped(line)
    assert not isinstance(held, str)
    assert held.timestamp == 1679315147

    other_text = CheckpointBody("ledger.example/log", 8, b"\x02" * 32).text()
    assert cosignature_problem(other_text, line, w.vkey) == (
        f"the cosignature by {w.vkey.name}+{w.vkey.key_id.hex()} does not verify"
    )
    other = SpecWitness("witness.example/w1")  # same name, another key: another key id
    assert "is by witness.example/w1+" in str(cosignature_problem(TEXT, line, other.vkey))
    zero = NoteSignature(line.name, line.key_id, b"\x00" * 8 + line.signature[8:])
    assert "has timestamp 0" in str(cosignature_problem(TEXT, zero, w.vkey))
    short = NoteSignature(line.name, line.key_id, line.signature[8:])
    assert "is 64 bytes after its key id" in str(cosignature_problem(TEXT, short, w.vkey))
    # A log's note key (type 0x01) is no cosigner key, whatever it signed.
    as_log = VerifierKey.ed25519(w.vkey.name, w.vkey.public_key)
    assert "is not a cosignature/v1 key (type 0x01" in str(cosignature_problem(TEXT, line, as_log))


def policy_text(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_a_policy_names_the_log_its_witnesses_and_counts_distinct_valid_cosigners() -> None:
    w1, w2, w3 = (SpecWitness(f"witness.example/w{n}") for n in (1, 2, 3))
    policy = parse_witness_policy(
        policy_text(
            "# who watches the ledger",
            f"log {LOG.encoded()}",
            "",
            f"witness one {w1.vkey.encoded()} https://w1.example/ # a comment",
            f"witness two {w2.vkey.encoded()}",
            f"witness three {w3.vkey.encoded()} http://127.0.0.1:8080",
            "quorum 2",
        ),
        "p",
    )
    assert policy.log == LOG
    assert [(w.name, w.url) for w in policy.witnesses] == [
        ("one", "https://w1.example"),
        ("two", None),
        ("three", "http://127.0.0.1:8080"),
    ]
    assert policy.quorum == 2
    stranger = SpecWitness("witness.example/w4")
    lines = [w1.cosign(TEXT, 5), w1.cosign(TEXT, 6), stranger.cosign(TEXT, 5), w3.cosign(TEXT, 5)]
    assert policy.cosigners(TEXT, lines) == ["one", "three"]
    forged = NoteSignature(w2.vkey.name, w2.vkey.key_id, w1.cosign(TEXT, 5).signature)
    assert policy.cosigners(TEXT, [forged]) == []


W = SpecWitness("witness.example/w1").vkey.encoded()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["quorum 0"], "p has no 'log <vkey>' line"),
        ([f"log {LOG.encoded()}"], "p has no 'quorum <k>' line"),
        ([f"log {LOG.encoded()}", "quorum 1"], "p: quorum 1 is more than the 0 witnesses listed"),
        ([f"log {LOG.encoded()}", "quorum -1"], "p line 2: quorum '-1' is not a whole number"),
        ([f"log {LOG.encoded()}", "quorum 01"], "p line 2: quorum '01' is not a whole number"),
        ([f"log {LOG.encoded()}", f"log {LOG.encoded()}"], "p line 2: a second 'log' line"),
        ([f"log {W}"], "p line 1: witness.example/w1+"),
        ([f"log {LOG.encoded()}", f"witness x {LOG.encoded()}"], "p line 2: ledger.example/log+"),
        (["log nokey"], "p line 1: verifier key 'nokey' is not three parts"),
        ([f"witness x {W} ftp://w"], "p line 1: witness URL 'ftp://w' is not an http(s) URL"),
        ([f"witness x {W}", f"witness y {W}"], "p line 2: witness y repeats witness x"),
        (["cosigner x y"], "p line 1: 'cosigner x y': expected 'log <vkey>', 'witness"),
    ],
)
def test_a_bad_policy_line_is_one_line_naming_it(lines: list[str], message: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_witness_policy(policy_text(*lines), "p")
    assert str(refused.value).startswith(message), str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_spec_witness_refuses_as_tlog_witness_says() -> None:
    """The test witness itself, against the spec's error cases (the ledger's handling of each is
    in tests/cli/test_witnessing.py)."""
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    log = VerifierKey.ed25519("ledger.example/log", raw)
    w = SpecWitness("witness.example/w1")
    w.trust(log)

    def note(size: int, root: bytes) -> bytes:
        text = CheckpointBody(log.name, size, root).text()
        line = NoteSignature(log.name, log.key_id, key.sign(text.encode()))
        return f"{text}\n{line.line()}".encode()

    leaves = [bytes([n]) * 32 for n in range(3)]
    assert w.add_checkpoint(b"old 0\n\n" + note(0, b"\x01" * 32))[0] == 422  # not the empty root
    assert w.add_checkpoint(b"old 0\nAAAA\n\n" + note(3, root(leaves)))[0] == 422  # proof from 0
    assert w.add_checkpoint(b"old 4\n\n" + note(3, root(leaves)))[0] == 400  # old above size
    assert w.add_checkpoint(b"no old line\n\n" + note(3, root(leaves)))[0] == 400
    unsigned = note(3, root(leaves)).split(b"\n\n")[0] + b"\n\n"
    assert w.add_checkpoint(b"old 0\n\n" + unsigned + "— x AAAAAAAA\n".encode())[0] == 403
    assert w.add_checkpoint(b"old 0\n\n" + note(0, EMPTY_ROOT))[0] == 200
    assert w.add_checkpoint(b"old 3\n\n" + note(3, root(leaves))) == (
        409,
        "text/x.tlog.size",
        b"0\n",
    )
    status, _, body = w.add_checkpoint(b"old 0\n\n" + note(3, root(leaves)))
    assert status == 200
    assert body.startswith("— witness.example/w1 ".encode())
    assert w.add_checkpoint(b"old 3\n\n" + note(3, b"\x09" * 32))[0] == 422  # same size, other root
    other = VerifierKey.ed25519("ledger.example/other", raw)
    assert (
        w.add_checkpoint(
            b"old 0\n\n" + note(3, root(leaves)).replace(log.name.encode(), other.name.encode())
        )[0]
        == 404
    )
