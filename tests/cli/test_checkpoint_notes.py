"""Checkpoints as C2SP tlog-checkpoint signed notes, on SQLite and PostgreSQL.

``mace checkpoint export --note -o FILE`` writes the newest checkpoint (after checkpointing every
event) as a signed note: origin, tree size, base64 root, then one Ed25519 signature line by the
checkpoint key under the origin. ``mace checkpoint public-key --vkey`` prints its verifier key.
A verifier we did not write, Go's ``golang.org/x/mod/sumdb/note``, accepts the note under that
key and rejects it with one byte of the root changed or under another key; ``mace checkpoint
verify FILE --vkey KEY`` gives the same verdicts with no store. Unusable input (a malformed note
or vkey, a bad origin) is one line, exit 2; a failed verification is ``INTEGRITY_FAILURE``, exit 1.

The stores are in the state CLI writes leave them: every command that writes checkpoints on close.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.cli_output import assert_failure_line, canonical_line
from support.go_note_verifier import GoNoteVerifier
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, run
from support.replay_cli import new_job

from domain.checkpoint_note import (
    CheckpointBody,
    NoteSignature,
    SignedNote,
    VerifierKey,
    key_id,
)
from infrastructure.application.ledger import Ledger
from infrastructure.storage.keys.checkpoint_key import read_checkpoint_key
from infrastructure.storage.settings import Settings

KEY = read_checkpoint_key(TEST_CHECKPOINT_KEY)


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    return out


def vkey(capsys: pytest.CaptureFixture[str]) -> str:
    out = ok(capsys, "checkpoint", "public-key", "--vkey")
    assert out.endswith("\n") and out.count("\n") == 1
    return out[:-1]


def signer(vkey: str) -> str:
    """``name+id`` of a verifier key, as verifiers name who signed (base64 may hold '+')."""
    return "+".join(vkey.split("+", 2)[:2])


def export_note(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    return canonical_line(ok(capsys, "checkpoint", "export", "--note", "-o", str(path), "--json"))


def first_checkpoint_digest(settings: Settings) -> str:
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        return ledger.checkpoints.get(1).checkpoint.digest()


def signed_by_test_key(text: str, name: str) -> bytes:
    """A note of ``text`` that the test checkpoint key signed under ``name``."""
    signature = NoteSignature(
        name, VerifierKey.ed25519(name, KEY.public.raw).key_id, KEY.sign(text.encode())
    )
    return SignedNote(text, (signature,)).encoded()


@dataclass(frozen=True)
class Noted:
    """A store with a job recorded, its newest checkpoint exported as a note, and its vkey."""

    file: Path
    answer: dict[str, Any]
    vkey: str

    @property
    def origin(self) -> str:
        return self.vkey.split("+")[0]


@pytest.fixture
def noted(cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Noted:
    new_job(capsys)
    file = tmp_path / "checkpoint.note"
    answer = export_note(capsys, file)
    return Noted(file, answer, vkey(capsys))


def test_the_note_states_the_newest_checkpoint_and_go_verifies_it(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    go_note_verifier: GoNoteVerifier,
    noted: Noted,
) -> None:
    note_file, answer, key = noted.file, noted.answer, noted.vkey
    origin = "mace.example.org/ledger/" + first_checkpoint_digest(cli_env)[:32]
    assert (answer["format"], answer["origin"], answer["written"]) == ("note", origin, 0)
    root = bytes.fromhex(str(answer["root"]))
    text = f"{origin}\n{answer['tree_size']}\n{base64.b64encode(root).decode()}\n"
    public = base64.b64encode(b"\x01" + KEY.public.raw).decode()
    assert key == f"{origin}+{VerifierKey.ed25519(origin, KEY.public.raw).key_id.hex()}+{public}"
    signature = base64.b64encode(
        VerifierKey.ed25519(origin, KEY.public.raw).key_id + KEY.sign(text.encode())
    ).decode()
    assert note_file.read_bytes() == f"{text}\n— {origin} {signature}\n".encode()

    assert go_note_verifier.verify(key, note_file) == (
        0,
        f"verified: {signer(key)}\n{text}",
    )
    code, out, err = run(capsys, "checkpoint", "verify", str(note_file), "--vkey", key)
    assert (code, err) == (0, "")
    assert out == (
        f"ok: checkpoint note of {origin} signed by {signer(key)}:"
        f" {answer['tree_size']} events, root {answer['root']}\n"
    )

    # The same checkpoint, origin and key make the same bytes: Ed25519 is deterministic, and the
    # origin, made from the first checkpoint, stays while the log grows.
    again = tmp_path / "again.note"
    export_note(capsys, again)
    assert again.read_bytes() == note_file.read_bytes()
    new_job(capsys, seed="s2")
    assert export_note(capsys, again)["origin"] == origin
    assert vkey(capsys) == key
    assert go_note_verifier.verify(key, again)[0] == 0


def test_go_and_mace_reject_a_note_with_one_byte_of_the_root_changed_or_another_key(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    go_note_verifier: GoNoteVerifier,
    noted: Noted,
) -> None:
    note_file, key, origin = noted.file, noted.vkey, noted.origin
    lines = note_file.read_bytes().split(b"\n")
    root = bytearray(base64.b64decode(lines[2]))
    root[7] ^= 0x01
    lines[2] = base64.b64encode(bytes(root))
    tampered = tmp_path / "tampered.note"
    tampered.write_bytes(b"\n".join(lines))
    other = VerifierKey.ed25519(
        origin, Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    )

    code, out = go_note_verifier.verify(key, tampered)
    assert (code, out) == (1, f"rejected: invalid signature for key {signer(key)}\n")
    code, out = go_note_verifier.verify(other.encoded(), note_file)
    assert (code, out) == (1, "rejected: note has no verifiable signatures\n")

    code, out, err = run(capsys, "checkpoint", "verify", str(tampered), "--vkey", key)
    assert (code, out) == (1, "")
    assert_failure_line(
        err,
        "INTEGRITY_FAILURE",
        f"checkpoint note {tampered}: the signature by {signer(key)} does not verify",
    )
    code, out, err = run(capsys, "checkpoint", "verify", str(note_file), "--vkey", other.encoded())
    assert (code, out) == (1, ""), err
    assert_failure_line(
        err,
        "INTEGRITY_FAILURE",
        f"checkpoint note {note_file}: no signature by {origin}+{other.key_id.hex()} (it is signed"
        f" by {signer(key)})",
    )


def test_a_configured_origin_names_the_log_and_a_note_for_another_origin_fails(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    go_note_verifier: GoNoteVerifier,
) -> None:
    new_job(capsys)
    default_note = tmp_path / "default.note"
    export_note(capsys, default_note)
    monkeypatch.setenv("MACE_LOG_ORIGIN", "ledger.example.com/audit")
    note_file = tmp_path / "configured.note"
    assert export_note(capsys, note_file)["origin"] == "ledger.example.com/audit"
    key = vkey(capsys)
    assert key.startswith("ledger.example.com/audit+")
    assert note_file.read_bytes().startswith(b"ledger.example.com/audit\n")
    assert go_note_verifier.verify(key, note_file)[0] == 0

    # The default origin's note is another log's to this key: signed under another name.
    code, out, err = run(capsys, "checkpoint", "verify", str(default_note), "--vkey", key)
    assert (code, out) == (1, "")
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert f"checkpoint note {default_note}: no signature by ledger.example.com/audit+" in err
    assert go_note_verifier.verify(key, default_note)[0] == 1

    # Signed by this log's key under its name, but stating another origin: not this log's.
    foreign = tmp_path / "foreign.note"
    body = CheckpointBody("other.example.com/log", 3, b"\x07" * 32)
    foreign.write_bytes(signed_by_test_key(body.text(), "ledger.example.com/audit"))
    code, out, err = run(capsys, "checkpoint", "verify", str(foreign), "--vkey", key)
    assert (code, out) == (1, "")
    assert_failure_line(
        err,
        "INTEGRITY_FAILURE",
        f"checkpoint note {foreign}: it is a checkpoint of origin 'other.example.com/log', not of"
        " 'ledger.example.com/audit'",
    )


@pytest.mark.parametrize(
    ("origin", "problem"),
    [
        ("ledger example", "holds a space (' ')"),
        ("a+b", "holds a '+'"),
        ("\u2003x", "holds a space"),
    ],
    ids=["space", "plus", "unicode-space"],
)
def test_an_origin_that_cannot_be_a_key_name_is_one_line_exit_2(
    origin: str,
    problem: str,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MACE_LOG_ORIGIN", origin)
    note_file = tmp_path / "checkpoint.note"
    for argv in (("public-key", "--vkey"), ("export", "--note", "-o", str(note_file))):
        code, out, err = run(capsys, "checkpoint", *argv)
        assert (code, out) == (2, ""), err
        assert_failure_line(err, "INVALID_INPUT")
        assert f"MACE_LOG_ORIGIN {origin!r} {problem}" in err, err
    assert not note_file.exists()


def test_malformed_notes_and_verifier_keys_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, noted: Noted
) -> None:
    note_file, key, origin = noted.file, noted.vkey, noted.origin
    good = note_file.read_bytes()
    text, _, signatures = good.partition(b"\n\n")
    extended = f"{origin}\n1\n{base64.b64encode(bytes(32)).decode()}\nextension\n"
    files = {
        "no-blank-line": (text + b"\n" + signatures, "the note has no blank line before"),
        "bad-base64": (text + b"\n\n\xe2\x80\x94 x %%%\n", "the signature by x is not base64"),
        "control": (good.replace(b"\n", b"\r\n", 1), "holds a control character '\\r'"),
        "no-dash": (text + b"\n\n- x AAAAAAAA\n", "does not start with '\u2014 '"),
        "extension": (signed_by_test_key(extended, origin), "the note's text has extension lines"),
        "not-utf8": (b"\xff" + good, "the note is not UTF-8"),
    }
    for name, (content, message) in files.items():
        path = tmp_path / f"{name}.note"
        path.write_bytes(content)
        code, out, err = run(capsys, "checkpoint", "verify", str(path), "--vkey", key)
        assert (code, out) == (2, ""), (name, err)
        assert_failure_line(err, "INVALID_INPUT")
        assert message in err, (name, err)

    wrong_id = key.split("+", 2)
    wrong_id[1] = "00000000"
    vkeys = {
        "garbage": "verifier key 'garbage' is not three parts",
        "+".join(wrong_id): "verifier key id 00000000 is not the id of its name and key",
        f"{origin}+{wrong_id[1]}+%%%": "verifier key material is not base64",
        f"a b+{wrong_id[1]}+AQ==": "verifier key name 'a b' holds a space",
    }
    for bad, message in vkeys.items():
        code, out, err = run(capsys, "checkpoint", "verify", str(note_file), "--vkey", bad)
        assert (code, out) == (2, ""), (bad, err)
        assert_failure_line(err, "INVALID_INPUT")
        assert message in err, (bad, err)

    pem = tmp_path / "checkpoint.pub"
    pem.write_text(KEY.public_pem())
    code, out, err = run(capsys, "checkpoint", "verify", str(note_file), "--public-key", str(pem))
    assert (code, out) == (2, "")
    assert_failure_line(err, "INVALID_INPUT")
    assert f"{note_file} is a signed note: check it with --vkey" in err


def test_a_vkey_of_another_signature_type_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], noted: Noted
) -> None:
    """A witness's cosignature key (type 0x04) is no key a log's checkpoint is signed by."""
    note_file, origin = noted.file, noted.origin
    cosigner = VerifierKey(origin, key_id(origin, 0x04, KEY.public.raw), 0x04, KEY.public.raw)
    code, out, err = run(
        capsys, "checkpoint", "verify", str(note_file), "--vkey", cosigner.encoded()
    )
    assert (code, out) == (2, "")
    assert_failure_line(err, "INVALID_INPUT")
    assert "is of signature type 0x04, not Ed25519 (0x01)" in err


def test_the_json_export_is_unchanged_and_also_verifies_with_the_vkey(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    path = tmp_path / "witness.json"
    answer = canonical_line(ok(capsys, "checkpoint", "export", "-o", str(path), "--json"))
    assert answer["format"] == "json"
    exported = orjson.loads(path.read_bytes())
    assert set(exported) == {"algorithm", "key_id", "checkpoint", "signature"}
    code, out, err = run(capsys, "checkpoint", "verify", str(path), "--vkey", vkey(capsys))
    assert (code, err) == (0, "")
    assert out.startswith(f"ok: checkpoint {answer['number']} signed by key {KEY.key_id}:")


def test_vkey_of_a_store_with_no_checkpoint_yet_says_how_to_get_one(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    # The store as `mace init` leaves it: its tables, no checkpoint.
    code, out, err = run(capsys, "checkpoint", "public-key", "--vkey")
    assert (code, out) == (2, "")
    assert_failure_line(
        err,
        "INVALID_INPUT",
        "the store has no checkpoint yet, and its log origin is made from its first: run"
        " 'mace checkpoint', or set MACE_LOG_ORIGIN",
    )
