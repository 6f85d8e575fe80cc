"""Bundles provable offline against a signed checkpoint, on SQLite and PostgreSQL.

``mace export`` carries the ledger's newest checkpoint (written first when it does not cover the
bundle), its public key and an inclusion proof for every record; ``mace replay --bundle`` and
``mace import`` check them and report "included in checkpoint N". The attacks: a proof, a leaf
index, the checkpoint body, its signature or the public key changed; a record rewritten by
someone holding the HMAC keys (every MAC and the manifest re-signed); a whole checkpoint forged
under another key, which only a pinned key (``--public-key``) catches; the leaf index in the
database edited. A ``mace-bundle/1`` file still reads, and nothing in it is called included.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

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

from domain.canonical import canonical_json, digest
from domain.checkpoint import Checkpoint, leaf_data
from domain.governance import Actor
from domain.job import Job
from domain.merkle import inclusion_proof, leaf_hash, root
from domain.replay_access import ReplayMode
from domain.snapshot import Snapshot
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
    """Sign a checkpoint of the attacker's own over the bundle's records."""
    records = data["records"]
    leaves = [
        leaf_hash(
            leaf_data(UUID(r["originator_id"]), r["version"], r["topic"], r["state"].encode())
        )
        for r in records
    ]
    genuine = data["checkpoint"]["signed"]["checkpoint"]
    body = Checkpoint.model_validate(
        {**genuine, "tree_size": len(leaves), "root": root(leaves).hex()}
    )
    key = PublicCheckpointKey.from_pem(attacker_pem())
    signature = ATTACKER_KEY.sign(body.signed_bytes())
    data["checkpoint"] = {
        "signed": {
            "algorithm": "ed25519",
            "key_id": key.key_id,
            "checkpoint": body.model_dump(mode="json"),
            "signature": base64.b64encode(signature).decode("ascii"),
        },
        "public_key": key.pem,
        "proofs": [
            {"leaf_index": i, "hashes": [h.hex() for h in inclusion_proof(leaves, i)]}
            for i in range(len(leaves))
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
    assert data["format"] == "mace-bundle/2"
    body = data["checkpoint"]["signed"]["checkpoint"]
    assert body["number"] == before + 1
    assert data["checkpoint"]["public_key"] == pem.read_text()
    assert len(data["checkpoint"]["proofs"]) == len(data["records"])
    expected = {
        "included": True,
        "number": before + 1,
        "tree_size": body["tree_size"],
        "root": body["root"],
        "key_id": data["checkpoint"]["signed"]["key_id"],
        "key_pinned": True,  # the export checked its own output under the ledger's own key
        "records_included": len(data["records"]),
        "records_not_provable": 0,
    }
    summary = (
        f"included in checkpoint {before + 1} (size {body['tree_size']}, root {body['root']}):"
        f" {len(data['records'])} records"
    )
    assert exported == {
        **expected,
        "summary": f"{summary}; checkpoint key {expected['key_id']} pinned",
    }

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
    rewrite(
        bundle,
        lambda d: d["checkpoint"]["proofs"].__setitem__(index, {"leaf_index": 0, "hashes": []}),
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


# --- attacks ------------------------------------------------------------------------------------


def _proof_hash(settings: Settings, data: dict[str, Any]) -> str:
    proofs = data["checkpoint"]["proofs"]
    index = next(i for i, p in enumerate(proofs) if p["hashes"])
    first = proofs[index]["hashes"][0]
    proofs[index]["hashes"][0] = ("0" if first[0] != "0" else "1") + first[1:]
    record = data["records"][index]
    return (
        f"stream {record['originator_id']} version {record['version']}: not included in checkpoint"
    )


def _leaf_index(settings: Settings, data: dict[str, Any]) -> str:
    proofs = data["checkpoint"]["proofs"]
    proofs[0]["leaf_index"], proofs[1]["leaf_index"] = (
        proofs[1]["leaf_index"],
        proofs[0]["leaf_index"],
    )
    record = data["records"][0]
    return (
        f"stream {record['originator_id']} version {record['version']}: not included in checkpoint"
    )


def _missing_proof(settings: Settings, data: dict[str, Any]) -> str:
    data["checkpoint"]["proofs"][-1] = None
    record = data["records"][-1]
    return f"stream {record['originator_id']} version {record['version']}: no inclusion proof"


def _checkpoint_body(settings: Settings, data: dict[str, Any]) -> str:
    data["checkpoint"]["signed"]["checkpoint"]["tree_size"] += 1
    return "the Ed25519 signature does not verify"


def _signature(settings: Settings, data: dict[str, Any]) -> str:
    data["checkpoint"]["signed"]["signature"] = base64.b64encode(bytes(64)).decode("ascii")
    return "the Ed25519 signature does not verify"


def _public_key(settings: Settings, data: dict[str, Any]) -> str:
    data["checkpoint"]["public_key"] = attacker_pem()
    return "is signed by key"  # the checkpoint names the ledger's key, not the swapped one


def _record_rewritten_with_the_hmac_keys(settings: Settings, data: dict[str, Any]) -> str:
    index = snapshot_index(data)
    resign_with_hmac_keys(settings, data, index)
    record = data["records"][index]
    return (
        f"stream {record['originator_id']} version {record['version']}: not included in checkpoint"
    )


ATTACKS = [
    _proof_hash,
    _leaf_index,
    _missing_proof,
    _checkpoint_body,
    _signature,
    _public_key,
    _record_rewritten_with_the_hmac_keys,
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
