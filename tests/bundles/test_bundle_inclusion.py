"""Bundles provable offline against a signed checkpoint, on SQLite and PostgreSQL.

``mace export`` writes a ``mace-bundle/3``: the ledger's verifier key and, for every record, a
C2SP tlog-proof (the record as its extra line, its index and inclusion path, the newest
checkpoint's signed note, written first when it does not cover the bundle). ``mace replay
--bundle`` and ``mace import`` check them and report "included in <origin>'s checkpoint". The
attacks: a proof's path or index changed; a proof swapped with another record's; a record
rewritten by someone holding the HMAC keys (every MAC and the manifest re-signed), with its
proof's extra line rewritten too or not; the note's text or signature changed; one proof naming
another checkpoint; the verifier key swapped; a whole checkpoint forged under another key, which
only a pinned key (``--public-key``) catches; the leaf index in the database edited. A
``mace-bundle/2`` (JSON checkpoint and proofs) and a ``mace-bundle/1`` file still read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.bundle_files import (
    bundle_json,
    bundle_replay,
    export,
    rewrite,
    use_store,
)
from support.cli_output import (
    NOT_REPRODUCED_LINE,
    assert_usage_error,
    canonical_line,
    event_count,
)
from support.ledger_fixtures import RawTable, run
from support.replay_cli import ROUTER_ID, act, new_job
from support.verifier_keys import ledger_vkey, signer

from domain.canonical import canonical_json, digest
from domain.checkpoint import leaf_data
from domain.checkpoint_note import (
    CheckpointBody,
    NoteSignature,
    SignedNote,
    VerifierKey,
    parse_checkpoint_text,
    parse_note,
    parse_vkey,
)
from domain.governance import Actor
from domain.job import Job
from domain.merkle import inclusion_proof, leaf_hash, root
from domain.replay_access import ReplayMode
from domain.snapshot import Snapshot
from domain.tlog_proof import TlogProof, parse_tlog_proof
from infrastructure.application.ledger import Ledger
from infrastructure.bundles.format import SIGNING_CONTEXT
from infrastructure.storage.keys.checkpoint_key import PublicCheckpointKey
from infrastructure.storage.keys.keyring import load_keyring
from infrastructure.storage.records.signed_record import SEPARATOR, mac_message
from infrastructure.storage.settings import Settings

ATTACKER_KEY = Ed25519PrivateKey.generate()


def public_key_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    code, out, err = run(capsys, "checkpoint", "public-key")
    assert (code, err) == (0, "")
    path = tmp_path / "checkpoint.pub"
    path.write_text(out)
    return path


def attacker_pem() -> str:
    return (
        ATTACKER_KEY.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )


def newest_number(settings: Settings) -> int:
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        newest = ledger.checkpoints.newest()
        assert newest is not None
        return newest.checkpoint.number


def snapshot_index(data: dict[str, Any]) -> int:
    """A record no seal covers: rewriting it with the HMAC keys passes every MAC check."""
    return next(
        i
        for i, r in enumerate(data["records"])
        if any(
            s["role"] == "snapshot" and s["originator_id"] == r["originator_id"]
            for s in data["manifest"]["streams"]
        )
    )


def resign_with_hmac_keys(settings: Settings, data: dict[str, Any], index: int) -> None:
    """Rewrite record ``index``'s body as someone holding the HMAC keys could: its MAC, its
    stream's digest, the records' digest and the manifest's signature all made anew."""
    keyring = load_keyring(settings, create=False)
    record = data["records"][index]
    prefix, key_id, _, body = record["state"].encode().split(SEPARATOR, 3)
    body = body.replace(b'"', b'"forged-', 1)
    message = mac_message(UUID(record["originator_id"]), record["version"], record["topic"], body)
    _, mac = keyring.sign(message, key_id.decode())
    record["state"] = SEPARATOR.join([prefix, key_id, mac.hex().encode(), body]).decode()
    manifest = data["manifest"]
    for stream in manifest["streams"]:
        own = [r for r in data["records"] if r["originator_id"] == stream["originator_id"]]
        stream["sha256"] = digest(own)
    manifest["records_sha256"] = digest(data["records"])
    signer, manifest_mac = keyring.sign(SIGNING_CONTEXT + canonical_json(manifest))
    data["signature"] = {"key_id": signer, "mac": manifest_mac.hex()}


def forge_checkpoint(data: dict[str, Any]) -> None:
    """Sign a checkpoint note of the attacker's own, under the ledger's origin, over the bundle's
    records, and give each record a tlog-proof in it."""
    entries = [
        leaf_data(UUID(r["originator_id"]), r["version"], r["topic"], r["state"].encode())
        for r in data["records"]
    ]
    leaves = [leaf_hash(entry) for entry in entries]
    origin = parse_vkey(data["checkpoint"]["vkey"]).name
    text = CheckpointBody(origin, len(leaves), root(leaves)).text()
    vkey = VerifierKey.ed25519(origin, PublicCheckpointKey.from_pem(attacker_pem()).raw)
    signature = NoteSignature(origin, vkey.key_id, ATTACKER_KEY.sign(text.encode()))
    note = SignedNote(text, (signature,)).encoded()
    data["checkpoint"] = {
        "vkey": vkey.encoded(),
        "proofs": [
            TlogProof(i, tuple(inclusion_proof(leaves, i)), note, entry).encoded().decode()
            for i, entry in enumerate(entries)
        ],
    }


def assert_integrity_failure(code: int, out: str, err: str, fragment: str) -> None:
    assert (code, out) == (1, "")
    assert err.startswith("mace: INTEGRITY_FAILURE: ")
    assert err.count("\n") == 1
    assert fragment in err, err


# --- what a bundle proves -----------------------------------------------------------------------


def test_export_proves_every_record_and_replay_and_import_report_it(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    other_store: str,
) -> None:
    act(monkeypatch, "ana", "auditor")
    job_id = new_job(capsys)
    pem = public_key_file(capsys, tmp_path)
    before = newest_number(cli_env)
    # A replay recorded with no checkpoint after it: the export must write one to cover it.
    with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
        ledger.replays.run(job_id, ReplayMode.AUDIT, Actor.of("ana", ["auditor"]))
    bundle = tmp_path / "job.json"
    code, out, err = run(capsys, "export", job_id, "-o", str(bundle), "--json")
    assert (code, err) == (0, ""), err
    exported = canonical_line(out)["checkpoint"]
    assert newest_number(cli_env) == before + 1
    data = bundle_json(bundle)
    assert data["format"] == "mace-bundle/3"
    vkey = ledger_vkey(capsys)
    assert data["checkpoint"]["vkey"] == vkey
    origin = parse_vkey(vkey).name
    # Every proof carries the note mace checkpoint export --note writes of that checkpoint.
    note_file = tmp_path / "checkpoint.note"
    code, out, err = run(capsys, "checkpoint", "export", "--note", "-o", str(note_file), "--json")
    assert (code, canonical_line(out)["number"]) == (0, before + 1)
    proofs = [parse_tlog_proof(p.encode()) for p in data["checkpoint"]["proofs"]]
    assert {p.note for p in proofs} == {note_file.read_bytes()}
    assert [p.extra for p in proofs] == [
        leaf_data(UUID(r["originator_id"]), r["version"], r["topic"], r["state"].encode())
        for r in data["records"]
    ]
    tree_size = canonical_line(out)["tree_size"]
    root_hex = canonical_line(out)["root"]
    key_id = PublicCheckpointKey.from_pem(pem.read_text()).key_id
    expected = {
        "included": True,
        "number": None,  # a note signs no checkpoint number: the origin names the log
        "origin": origin,
        "tree_size": tree_size,
        "root": root_hex,
        "key_id": key_id,
        "key_pinned": True,  # the export checked its own output under the ledger's own key
        "records_included": len(data["records"]),
        "records_not_provable": 0,
    }
    summary = (
        f"included in {origin}'s checkpoint (size {tree_size}, root {root_hex}):"
        f" {len(data['records'])} records"
    )
    assert exported == {**expected, "summary": f"{summary}; checkpoint key {key_id} pinned"}

    code, report, err = bundle_replay(capsys, bundle)
    assert (code, err) == (0, ""), err
    unpinned = f"{summary}; checkpoint key {expected['key_id']} is the bundle's own, unpinned"
    assert report["bundle"]["checkpoint"] == {**expected, "key_pinned": False, "summary": unpinned}
    code, out, err = run(capsys, "replay", "--bundle", str(bundle), "--public-key", str(pem))
    assert (code, err) == (0, ""), err
    assert f"bundle {bundle}: {summary}; checkpoint key {expected['key_id']} pinned" in out

    use_store(monkeypatch, other_store)
    code, out, err = run(capsys, "import", str(bundle), "--public-key", str(pem), "--json")
    assert (code, err) == (0, ""), err
    assert canonical_line(out)["checkpoint"]["key_pinned"] is True
    # The imported records are checkpointed in their new store too: a bundle of it proves them.
    code, out, err = run(capsys, "export", job_id, "-o", str(tmp_path / "again.json"), "--json")
    assert (code, err) == (0, ""), err
    assert canonical_line(out)["checkpoint"]["included"] is True


def test_a_redacted_bundle_proves_the_records_it_did_not_rewrite(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    job_id = new_job(capsys, "remember that my pin is zq81xvpii", "p1")
    bundle = export(capsys, job_id, tmp_path / "redacted.json", "--redact")
    data = bundle_json(bundle)
    redacted = [r.get("redacted", False) for r in data["records"]]
    assert [p is None for p in data["checkpoint"]["proofs"]] == redacted
    code, report, err = bundle_replay(capsys, bundle)
    assert (code, err) == (1, NOT_REPRODUCED_LINE), err  # redaction hid what could be re-run
    facts = report["bundle"]["checkpoint"]
    assert (facts["included"], facts["records_not_provable"]) == (True, sum(redacted))
    assert facts["records_included"] == len(redacted) - sum(redacted) > 0

    # A redacted record cannot be given a proof: its stored bytes are not in the bundle.
    index = redacted.index(True)
    proven = redacted.index(False)
    rewrite(
        bundle,
        lambda d: d["checkpoint"]["proofs"].__setitem__(index, d["checkpoint"]["proofs"][proven]),
    )
    code, out, err = run(capsys, "replay", "--bundle", str(bundle))
    assert_integrity_failure(code, out, err, "redacted, yet it has an inclusion proof")


def test_a_first_format_bundle_reads_but_proves_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    other_store: str,
) -> None:
    act(monkeypatch, "ana", "auditor")
    job_id = new_job(capsys)
    pem = public_key_file(capsys, tmp_path)
    bundle = export(capsys, job_id, tmp_path / "job.json")

    def first_format(data: dict[str, Any]) -> None:
        del data["checkpoint"]
        data["format"] = "mace-bundle/1"

    rewrite(bundle, first_format)
    not_provable = {
        "included": False,
        "number": None,
        "origin": None,
        "tree_size": None,
        "root": None,
        "key_id": None,
        "key_pinned": False,
        "records_included": 0,
        "records_not_provable": len(bundle_json(bundle)["records"]),
        "summary": "not provable: no checkpoint",
    }
    for pin in ((), ("--public-key", str(pem))):
        code, report, err = bundle_replay(capsys, bundle, *pin)
        assert (code, err) == (0, ""), err
        assert report["bundle"]["checkpoint"] == not_provable
    code, out, err = run(capsys, "replay", "--bundle", str(bundle))
    assert f"bundle {bundle}: not provable: no checkpoint" in out
    use_store(monkeypatch, other_store)
    code, out, err = run(capsys, "import", str(bundle))
    assert (code, err) == (0, ""), err
    assert "  not provable: no checkpoint" in out.splitlines()

    def second_format(data: dict[str, Any]) -> None:
        data["format"] = "mace-bundle/2"

    rewrite(bundle, second_format)
    code, out, err = run(capsys, "replay", "--bundle", str(bundle))
    assert (code, out) == (2, "")
    assert "is not a valid mace-bundle/2 file: it has no checkpoint" in err


SECOND_FORMAT_BUNDLE = (
    Path(__file__).parent / "regressions" / "test_replay_incident_r1_misrouted.bundle.json"
)
"""A ``mace-bundle/2`` file as that format's export wrote it (JSON checkpoint and proofs),
signed with the TEST-ONLY key beside it."""


def test_a_second_format_bundle_reads_and_its_json_proofs_are_checked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    keyring = orjson.loads((SECOND_FORMAT_BUNDLE.parent / "TEST-ONLY-keyring.json").read_bytes())
    monkeypatch.setenv("MACE_SIGNING_KEYS", orjson.dumps(keyring["keys"]).decode())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", keyring["active_key_id"])
    act(monkeypatch, "incident-auditor", "auditor")
    bundle = tmp_path / "second.json"
    bundle.write_bytes(SECOND_FORMAT_BUNDLE.read_bytes())
    data = bundle_json(bundle)
    assert data["format"] == "mace-bundle/2"
    body = data["checkpoint"]["signed"]["checkpoint"]
    code, report, err = bundle_replay(capsys, bundle)
    assert code == 1 and "REPLAY_DIVERGENCE" in err  # the incident it was exported for
    facts = report["bundle"]["checkpoint"]
    assert (facts["included"], facts["number"], facts["origin"]) == (True, body["number"], None)
    assert facts["records_included"] == len(data["records"])
    # A verifier key of the same Ed25519 key checks its proofs with no keyring.
    key = PublicCheckpointKey.from_pem(data["checkpoint"]["public_key"])
    vkey = VerifierKey.ed25519("any.example/origin", key.raw).encoded()
    code, out, err = run(capsys, "proof", "verify", str(bundle), "--vkey", vkey)
    assert (code, err) == (0, ""), err
    assert out.startswith(f"ok: bundle {bundle}: included in checkpoint {body['number']} (size")

    def changed_hash(data: dict[str, Any]) -> None:
        proof = data["checkpoint"]["proofs"][0]
        proof["hashes"][0] = ("0" if proof["hashes"][0][0] != "0" else "1") + proof["hashes"][0][1:]

    rewrite(bundle, changed_hash)
    record = data["records"][0]
    expected = f"stream {record['originator_id']} version {record['version']}: not included"
    for argv in (
        ("replay", "--bundle", str(bundle)),
        ("proof", "verify", str(bundle), "--vkey", vkey),
    ):
        assert_integrity_failure(*run(capsys, *argv), expected)


# --- attacks ------------------------------------------------------------------------------------


def _proofs(data: dict[str, Any]) -> list[str]:
    proofs = data["checkpoint"]["proofs"]
    assert isinstance(proofs, list)
    return proofs


def _not_included(data: dict[str, Any], index: int) -> str:
    record = data["records"][index]
    return f"the tlog-proof of stream {record['originator_id']} version {record['version']}: entry"


def _not_the_entry(data: dict[str, Any], index: int) -> str:
    record = data["records"][index]
    return (
        f"stream {record['originator_id']} version {record['version']}: its bytes are not the"
        " entry its tlog-proof proves"
    )


def _changed_line(proof: str, number: int) -> str:
    """``proof`` with the first base64 character of its line ``number`` changed."""
    lines = proof.split("\n")
    line = lines[number]
    lines[number] = ("A" if line[0] != "A" else "B") + line[1:]
    return "\n".join(lines)


def _path_hash(settings: Settings, data: dict[str, Any]) -> str:
    """A proof that does not verify: one hash of its inclusion path changed."""
    proofs = _proofs(data)
    index = next(i for i, p in enumerate(proofs) if parse_tlog_proof(p.encode()).path)
    proofs[index] = _changed_line(proofs[index], 3)  # header, extra, index, then the path
    return _not_included(data, index)


def _index(settings: Settings, data: dict[str, Any]) -> str:
    """A proof that does not verify: its index is another entry's."""
    proofs = _proofs(data)
    first, second = (parse_tlog_proof(p.encode()).index for p in proofs[:2])
    proofs[0] = proofs[0].replace(f"\nindex {first}\n", f"\nindex {second}\n", 1)
    return _not_included(data, 0)


def _missing_proof(settings: Settings, data: dict[str, Any]) -> str:
    _proofs(data)[-1] = None  # type: ignore[call-overload]
    record = data["records"][-1]
    return f"stream {record['originator_id']} version {record['version']}: no inclusion proof"


def _another_records_proof(settings: Settings, data: dict[str, Any]) -> str:
    """A record whose leaf is not the proven one: two records' proofs swapped, each valid."""
    proofs = _proofs(data)
    proofs[0], proofs[1] = proofs[1], proofs[0]
    return _not_the_entry(data, 0)


def _record_rewritten_with_the_hmac_keys(settings: Settings, data: dict[str, Any]) -> str:
    """A record whose leaf is not the proven one: rewritten, MACs and manifest signed anew."""
    index = snapshot_index(data)
    resign_with_hmac_keys(settings, data, index)
    return _not_the_entry(data, index)


def _record_and_its_extra_rewritten(settings: Settings, data: dict[str, Any]) -> str:
    """The rewritten record put in its proof's extra line too: then the proof does not verify."""
    index = snapshot_index(data)
    resign_with_hmac_keys(settings, data, index)
    record = data["records"][index]
    proof = parse_tlog_proof(_proofs(data)[index].encode())
    entry = leaf_data(
        UUID(record["originator_id"]), record["version"], record["topic"], record["state"].encode()
    )
    _proofs(data)[index] = TlogProof(proof.index, proof.path, proof.note, entry).encoded().decode()
    return _not_included(data, index)


def _note_text(settings: Settings, data: dict[str, Any]) -> str:
    """A note with a bad signature: its tree size changed (in every proof)."""
    proofs = _proofs(data)
    size = parse_checkpoint_text(parse_note(parse_tlog_proof(proofs[0].encode()).note).text)
    for i, proof in enumerate(proofs):
        proofs[i] = proof.replace(f"\n{size.tree_size}\n", f"\n{size.tree_size + 1}\n", 1)
    return "the signature by"


def _note_signature(settings: Settings, data: dict[str, Any]) -> str:
    """A note with a bad signature: its signature bytes changed (in every proof)."""
    proofs = _proofs(data)
    note = parse_note(parse_tlog_proof(proofs[0].encode()).note)
    (line,) = note.signatures
    forged = NoteSignature(line.name, line.key_id, bytes(64))
    for i, proof in enumerate(proofs):
        proofs[i] = proof.replace(line.line(), forged.line())
    return "the signature by"


def _another_checkpoint(settings: Settings, data: dict[str, Any]) -> str:
    """One proof's note not the others' (its signature line changed)."""
    proofs = _proofs(data)
    note = parse_note(parse_tlog_proof(proofs[-1].encode()).note)
    (line,) = note.signatures
    proofs[-1] = proofs[-1].replace(
        line.line(), NoteSignature(line.name, line.key_id, bytes(64)).line()
    )
    record = data["records"][-1]
    return (
        f"the tlog-proof of stream {record['originator_id']} version {record['version']} holds"
        " another checkpoint than the others"
    )


def _vkey(settings: Settings, data: dict[str, Any]) -> str:
    """The bundle's verifier key swapped for the attacker's, under the ledger's origin."""
    origin = parse_vkey(data["checkpoint"]["vkey"]).name
    raw = PublicCheckpointKey.from_pem(attacker_pem()).raw
    data["checkpoint"]["vkey"] = VerifierKey.ed25519(origin, raw).encoded()
    return "no signature by"  # the note is signed by the ledger's key, not the swapped one


ATTACKS = [
    _path_hash,
    _index,
    _missing_proof,
    _another_records_proof,
    _record_rewritten_with_the_hmac_keys,
    _record_and_its_extra_rewritten,
    _note_text,
    _note_signature,
    _another_checkpoint,
    _vkey,
]


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda f: f.__name__.strip("_"))
def test_an_unproven_bundle_fails_with_integrity_failure(
    attack: Callable[[Settings, dict[str, Any]], str],
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    bundle = export(capsys, new_job(capsys), tmp_path / "job.json")
    expected: list[str] = []
    rewrite(bundle, lambda data: expected.append(attack(cli_env, data)))
    rows = event_count(cli_env)
    for argv in (("replay", "--bundle", str(bundle)), ("import", str(bundle))):
        assert_integrity_failure(*run(capsys, *argv), expected[0])
    assert event_count(cli_env) == rows


def test_a_forged_checkpoint_passes_only_unpinned_and_says_so(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    pem = public_key_file(capsys, tmp_path)
    bundle = export(capsys, new_job(capsys), tmp_path / "job.json")

    rewrite(bundle, forge_checkpoint)
    attacker = PublicCheckpointKey.from_pem(attacker_pem()).key_id
    code, report, err = bundle_replay(capsys, bundle)
    assert (code, err) == (0, ""), err
    facts = report["bundle"]["checkpoint"]
    assert (facts["included"], facts["key_id"], facts["key_pinned"]) == (True, attacker, False)
    assert facts["summary"].endswith(f"checkpoint key {attacker} is the bundle's own, unpinned")
    ledger_key = PublicCheckpointKey.from_pem(pem.read_text()).key_id
    for argv in (("replay", "--bundle"), ("import",)):
        assert_integrity_failure(
            *run(capsys, *argv, str(bundle), "--public-key", str(pem)),
            f"its checkpoint key {attacker} is not the pinned key {ledger_key}",
        )
    # The ledger's verifier key pins it as well, with no keyring and no store.
    vkey = ledger_vkey(capsys)
    assert_integrity_failure(
        *run(capsys, "proof", "verify", str(bundle), "--vkey", vkey),
        f"no signature by {signer(vkey)}",
    )


def test_an_edited_leaf_index_in_the_store_fails_the_export(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    job_id = new_job(capsys)
    raw = RawTable(cli_env)
    job, snapshot = str(Job.id_for(job_id)), str(Snapshot.id_for(ROUTER_ID))
    where = " WHERE originator_id = %s AND originator_version = 1"
    positions = [
        raw.execute(f"SELECT position FROM mace_log_leaves{where}", (stream,))[0][0]
        for stream in (job, snapshot)
    ]
    # Swap the two leaves' positions, as someone with database access could.
    raw.execute(f"UPDATE mace_log_leaves SET position = -1{where}", (job,))
    raw.execute(f"UPDATE mace_log_leaves SET position = %s{where}", (positions[0], snapshot))
    raw.execute(f"UPDATE mace_log_leaves SET position = %s{where}", (positions[1], job))
    code, out, err = run(capsys, "export", job_id, "-o", str(tmp_path / "job.json"))
    assert_integrity_failure(code, out, err, f"stream {job} version 1: not included in checkpoint")
    assert not (tmp_path / "job.json").exists()


def test_a_public_key_that_is_not_one_is_bad_input(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    job_id = new_job(capsys)
    bundle = export(capsys, job_id, tmp_path / "job.json")
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("hello\n")
    rows = event_count(cli_env)
    for pin, message in (
        (tmp_path / "absent.pem", f"--public-key {tmp_path / 'absent.pem'}: cannot read it"),
        (not_a_key, f"--public-key {not_a_key}: public key is not PEM"),
    ):
        for argv in (("replay", "--bundle", str(bundle)), ("import", str(bundle))):
            assert_usage_error(*run(capsys, *argv, "--public-key", str(pin)), message)
    code, out, err = run(capsys, "replay", job_id, "--public-key", str(not_a_key))
    assert_usage_error(code, out, err, "--public-key pins a bundle's checkpoint key: it needs")
    assert event_count(cli_env) == rows
