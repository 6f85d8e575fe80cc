"""``mace proof verify FILE --vkey KEY``: a record's tlog-proof, or a bundle's, checked with no
store, on SQLite and PostgreSQL.

A proof is taken out of a bundle ``mace export`` wrote (on a store in the state CLI writes leave
it: checkpointed). ``mace proof verify`` and a checker we did not write (Go's
``golang.org/x/mod/sumdb/tlog.CheckRecord`` over ``tlog.RecordHash(extra)``, and
``golang.org/x/mod/sumdb/note.Open``) accept it, and reject it, each with exit 1 (mace: one line,
``INTEGRITY_FAILURE``), when a path hash, the index, a byte of the record (its extra line) or
the note's signature is changed, or the key is another. A witness's cosignature line on the note
is not checked (no policy here) and the answer says so. Unusable input is one line, exit 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.bundle_files import bundle_json, export, rewrite
from support.cli_output import assert_usage_error, canonical_line
from support.go_note_verifier import GoNoteVerifier
from support.ledger_fixtures import run
from support.replay_cli import act, new_job
from support.verifier_keys import ledger_vkey, signer
from support.witness_server import SpecWitness

from domain.checkpoint import parse_leaf_data
from domain.checkpoint_note import NoteSignature, VerifierKey, parse_checkpoint_text, parse_note
from domain.tlog_proof import TlogProof, parse_tlog_proof
from infrastructure.storage.settings import Settings

WITNESS_KEY = Ed25519PrivateKey.generate()
OTHER_KEY = Ed25519PrivateKey.generate()


def _raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes_raw()


@dataclass(frozen=True)
class Exported:
    """A bundle of a new job, its job's first record's tlog-proof as a file of its own, and the
    ledger's verifier key."""

    bundle: Path
    proof: Path
    vkey: str


@pytest.fixture
def exported(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Exported:
    act(monkeypatch, "ana", "auditor")
    bundle = export(capsys, new_job(capsys), tmp_path / "job.json")
    proof = tmp_path / "record.tlog-proof"
    proof.write_text(bundle_json(bundle)["checkpoint"]["proofs"][0])
    return Exported(bundle, proof, ledger_vkey(capsys))


def test_a_records_proof_verifies_alone_with_mace_and_with_go(
    capsys: pytest.CaptureFixture[str], exported: Exported, go_proof_verifier: GoNoteVerifier
) -> None:
    bundle, path, vkey = exported.bundle, exported.proof, exported.vkey
    proof = parse_tlog_proof(path.read_bytes())
    assert proof.extra is not None
    record = parse_leaf_data(proof.extra)
    first = bundle_json(bundle)["records"][0]
    assert (str(record.originator_id), record.version, record.topic, record.state) == (
        first["originator_id"],
        first["version"],
        first["topic"],
        first["state"].encode(),
    )
    body = parse_checkpoint_text(parse_note(proof.note).text)
    code, out, err = run(capsys, "proof", "verify", str(path), "--vkey", vkey)
    assert (code, err) == (0, ""), err
    assert out == (
        f"ok: stream {record.originator_id} version 1 ({record.topic}) is entry {proof.index} of"
        f" {body.origin}'s log, in its checkpoint of size {body.tree_size} (root"
        f" {body.root.hex()}) signed by {signer(vkey)}; 0 other signature(s) (witness"
        " cosignatures) not checked\n"
    )
    code, out, err = run(capsys, "proof", "verify", str(path), "--vkey", vkey, "--json")
    assert (code, err) == (0, "")
    assert canonical_line(out) == {
        "ok": True,
        "kind": "record",
        "stream": str(record.originator_id),
        "version": 1,
        "topic": record.topic,
        "index": proof.index,
        "origin": body.origin,
        "tree_size": body.tree_size,
        "root": body.root.hex(),
        "cosigners": None,  # no policy checked any
        "signed_by": signer(vkey),
        "other_signatures_not_checked": 0,
    }
    assert go_proof_verifier.verify(vkey, path) == (
        0,
        f"verified: {proof.index} {body.tree_size}\n",
    )

    code, out, err = run(capsys, "proof", "verify", str(bundle), "--vkey", vkey)
    assert (code, err) == (0, ""), err
    records = len(bundle_json(bundle)["records"])
    assert out == (
        f"ok: bundle {bundle}: included in {body.origin}'s checkpoint (size {body.tree_size},"
        f" root {body.root.hex()}): {records} records; checkpoint key"
        f" {canonical_line(run(capsys, 'checkpoint', 'public-key', '--json')[1])['key_id']}"
        " pinned; its manifest and MACs not checked (they need the ledger's HMAC keys: mace"
        " replay --bundle checks them)\n"
    )


def _path_hash(proof: TlogProof, vkey: str) -> tuple[TlogProof, str]:
    path = (bytes([proof.path[0][0] ^ 1]) + proof.path[0][1:], *proof.path[1:])
    return TlogProof(proof.index, path, proof.note, proof.extra), "does not lead"


def _index(proof: TlogProof, vkey: str) -> tuple[TlogProof, str]:
    return TlogProof(proof.index + 1, proof.path, proof.note, proof.extra), "does not lead"


def _record_byte(proof: TlogProof, vkey: str) -> tuple[TlogProof, str]:
    assert proof.extra is not None
    extra = proof.extra[:-2] + bytes([proof.extra[-2] ^ 1]) + proof.extra[-1:]
    return TlogProof(proof.index, proof.path, proof.note, extra), "does not lead"


def _note_signature(proof: TlogProof, vkey: str) -> tuple[TlogProof, str]:
    note = parse_note(proof.note)
    (line,) = note.signatures
    forged = NoteSignature(
        line.name, line.key_id, bytes([line.signature[0] ^ 1]) + line.signature[1:]
    )
    note_bytes = proof.note.replace(line.line().encode(), forged.line().encode())
    return TlogProof(proof.index, proof.path, note_bytes, proof.extra), "does not verify"


TAMPERINGS: list[Callable[[TlogProof, str], tuple[TlogProof, str]]] = [
    _path_hash,
    _index,
    _record_byte,
    _note_signature,
]


def test_a_tampered_proof_or_another_key_fails_with_mace_and_with_go(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    exported: Exported,
    go_proof_verifier: GoNoteVerifier,
) -> None:
    path, vkey = exported.proof, exported.vkey
    genuine = parse_tlog_proof(path.read_bytes())
    for tamper in TAMPERINGS:
        changed, fragment = tamper(genuine, vkey)
        tampered = tmp_path / f"{tamper.__name__}.tlog-proof"
        tampered.write_bytes(changed.encoded())
        code, out, err = run(capsys, "proof", "verify", str(tampered), "--vkey", vkey)
        assert (code, out) == (1, ""), tamper.__name__
        assert err.startswith(f"mace: INTEGRITY_FAILURE: tlog-proof {tampered}: ")
        assert err.count("\n") == 1 and fragment in err, err
        assert go_proof_verifier.verify(vkey, tampered)[0] == 1, tamper.__name__
    origin = vkey.split("+")[0]
    other = VerifierKey.ed25519(origin, _raw(OTHER_KEY)).encoded()
    code, out, err = run(capsys, "proof", "verify", str(path), "--vkey", other)
    assert (code, out) == (1, "")
    assert f"no signature by {signer(other)}" in err and err.count("\n") == 1
    assert go_proof_verifier.verify(other, path)[0] == 1


def test_a_cosigned_note_verifies_and_the_answer_says_its_cosignature_was_not_checked(
    capsys: pytest.CaptureFixture[str], exported: Exported, go_proof_verifier: GoNoteVerifier
) -> None:
    path, vkey = exported.proof, exported.vkey
    proof = parse_tlog_proof(path.read_bytes())
    note = parse_note(proof.note)
    witness = VerifierKey.ed25519("witness.example", _raw(WITNESS_KEY))
    # A line of the witness's shape; what it signs is tlog-cosignature's business, not checked.
    cosigned = note.signed_by(NoteSignature(witness.name, witness.key_id, WITNESS_KEY.sign(b"x")))
    path.write_bytes(TlogProof(proof.index, proof.path, cosigned.encoded(), proof.extra).encoded())
    code, out, err = run(capsys, "proof", "verify", str(path), "--vkey", vkey, "--json")
    assert (code, err) == (0, ""), err
    assert canonical_line(out)["other_signatures_not_checked"] == 1
    assert go_proof_verifier.verify(vkey, path)[0] == 0


def test_unusable_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, exported: Exported
) -> None:
    bundle, path, vkey = exported.bundle, exported.proof, exported.vkey
    proof = parse_tlog_proof(path.read_bytes())
    bare = tmp_path / "bare.tlog-proof"
    bare.write_bytes(TlogProof(proof.index, proof.path, proof.note).encoded())
    garbage = tmp_path / "garbage.tlog-proof"
    garbage.write_bytes(b"hello\n\nworld\n")
    first = tmp_path / "first.json"
    first.write_bytes(bundle.read_bytes())

    def first_format(data: dict[str, object]) -> None:
        del data["checkpoint"]
        data["format"] = "mace-bundle/1"

    rewrite(first, first_format)
    cases = [
        ((str(bare), "--vkey", vkey), "it has no extra line"),
        ((str(garbage), "--vkey", vkey), "the proof's first line is 'hello'"),
        ((str(tmp_path / "absent"), "--vkey", vkey), "cannot read"),
        ((str(path), "--vkey", "not-a-key"), "verifier key 'not-a-key' is not three parts"),
        ((str(first), "--vkey", vkey), "is a mace-bundle/1 file: it holds no proofs"),
    ]
    for argv, message in cases:
        assert_usage_error(*run(capsys, "proof", "verify", *argv), message)


def _policy(tmp_path: Path, vkey: str, *witnesses: SpecWitness, quorum: int) -> Path:
    listed = "".join(f"witness {w.name} {w.vkey.encoded()}\n" for w in witnesses)
    path = tmp_path / "policy.txt"
    path.write_text(f"# the ledger and its witnesses\nlog {vkey}\n{listed}quorum {quorum}\n")
    return path


def _cosigned_by(path: Path, *lines: Callable[[str], NoteSignature]) -> None:
    """The proof file at ``path`` with its note cosigned by each of ``lines`` (given its text)."""
    proof = parse_tlog_proof(path.read_bytes())
    note = parse_note(proof.note)
    for line in lines:
        note = note.signed_by(line(note.text))
    path.write_bytes(TlogProof(proof.index, proof.path, note.encoded(), proof.extra).encoded())


def test_a_policy_needs_a_quorum_of_valid_cosignatures_on_the_proofs_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, exported: Exported
) -> None:
    """Offline, as a relying party holds a proof: the note must carry valid cosignatures of a
    quorum of the policy's witnesses; one forged (it signs another text) does not count."""
    path, vkey = exported.proof, exported.vkey
    first, second = SpecWitness("w1.example"), SpecWitness("w2.example")
    policy = _policy(tmp_path, vkey, first, second, quorum=2)
    pristine = path.read_bytes()
    _cosigned_by(path, first.cosign, lambda text: second.cosign(text + "forged\n"))
    code, out, err = run(capsys, "proof", "verify", str(path), "--policy", str(policy))
    assert (code, out) == (1, ""), err
    assert err.startswith("mace: WITNESS_FAILED: tlog-proof ") and err.count("\n") == 1
    assert "cosigned by 1 of the policy's witnesses (w1.example), below its quorum of 2" in err
    path.write_bytes(pristine)
    _cosigned_by(path, first.cosign, second.cosign)
    code, out, err = run(capsys, "proof", "verify", str(path), "--policy", str(policy), "--json")
    assert (code, err) == (0, ""), err
    answer = canonical_line(out)
    assert answer["cosigners"] == ["w1.example", "w2.example"]
    assert answer["other_signatures_not_checked"] == 0
    # The same with --vkey named too; the text answer names the cosigners and the quorum.
    code, out, err = run(
        capsys, "proof", "verify", str(path), "--vkey", vkey, "--policy", str(policy)
    )
    assert (code, err) == (0, ""), err
    assert "cosigned by 2 of the policy's witnesses (w1.example, w2.example), quorum 2" in out


def test_a_bundle_without_cosignatures_fails_a_policy_and_bad_keys_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, exported: Exported
) -> None:
    vkey = exported.vkey
    policy = _policy(tmp_path, vkey, SpecWitness("w1.example"), quorum=1)
    code, out, err = run(capsys, "proof", "verify", str(exported.bundle), "--policy", str(policy))
    assert (code, out) == (1, "")
    assert f"WITNESS_FAILED: bundle {exported.bundle}'s checkpoint is cosigned by 0" in err
    assert err.count("\n") == 1
    origin = vkey.split("+")[0]
    other = VerifierKey.ed25519(origin, _raw(OTHER_KEY)).encoded()
    given = ("proof", "verify", str(exported.proof))
    assert_usage_error(
        *run(capsys, *given, "--vkey", other, "--policy", str(policy)),
        f"--vkey {other} is not the policy's log key {vkey}: name one",
    )
    assert_usage_error(
        *run(capsys, *given), "proof verify needs --vkey KEY, or --policy FILE whose log line is it"
    )
