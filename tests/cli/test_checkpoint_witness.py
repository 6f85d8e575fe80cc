"""Exported checkpoints as outside witnesses, on SQLite and PostgreSQL: ``mace checkpoint export``,
``checkpoint verify`` (no store), ``checkpoint prove`` and ``verify --all --checkpoint FILE``.

The attack they stop: the store restored from an older copy. Its chain is shorter but intact, so
``verify --all`` alone passes (the documented limit); against a checkpoint exported before, it
fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.cli_output import assert_failure_line, canonical_line
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, RawTable, run
from support.replay_cli import new_job
from support.store_backups import roll_back, save

from domain.canonical import canonical_json
from domain.checkpoint import CHECKPOINT_STREAM
from domain.merkle import verify_consistency
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.tables import HEAD_BUCKETS, HEAD_NODES
from infrastructure.storage.keys.checkpoint_key import read_checkpoint_key
from infrastructure.storage.settings import Settings

KEY = read_checkpoint_key(TEST_CHECKPOINT_KEY)


def public_key_file(directory: Path) -> Path:
    path = directory / "checkpoint.pub"
    path.write_text(KEY.public_pem())
    return path


def export(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    code, out, err = run(capsys, "checkpoint", "export", "-o", str(path), "--json")
    assert (code, err) == (0, ""), err
    return canonical_line(out)


def test_export_writes_the_newest_checkpoint_covering_every_event_as_canonical_json(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    table = RawTable(cli_env)
    table.execute("DELETE FROM {table} WHERE originator_id = %s", (table.key(CHECKPOINT_STREAM),))
    # No checkpoint covers the job now (its checkpoints are gone with their head index).
    for name in (HEAD_BUCKETS, HEAD_NODES):
        table.execute(f"DELETE FROM {name}")
    path = tmp_path / "witness.json"
    answer = export(capsys, path)
    events = table.execute("SELECT COUNT(*) FROM {table}")[0][0] - 1  # but the checkpoint
    assert (answer["number"], answer["tree_size"], answer["written"]) == (1, events, 1)
    exported = orjson.loads(path.read_bytes())
    assert path.read_bytes() == canonical_json(exported)
    assert set(exported) == {"algorithm", "key_id", "checkpoint", "signature"}
    assert (exported["algorithm"], exported["key_id"]) == ("ed25519", KEY.key_id)
    assert exported["checkpoint"]["root"] == answer["root"]

    code, out, err = run(capsys, "checkpoint", "export", "-o", str(path))
    assert (code, err) == (0, "")
    assert out == f"checkpoint 1 ({events} events, root {answer['root']}) exported to {path}\n"


def test_checkpoint_verify_needs_only_the_file_and_the_public_key(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    new_job(capsys)
    path = tmp_path / "witness.json"
    answer = export(capsys, path)
    public = public_key_file(tmp_path)
    # No store, no keys: the check reads the two files alone.
    for name in ("MACE_SIGNING_KEYS", "MACE_ACTIVE_KEY_ID", "MACE_CHECKPOINT_KEY"):
        monkeypatch.delenv(name)
    nowhere = tmp_path / "nowhere"
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{nowhere}/mace.db")
    code, out, err = run(capsys, "checkpoint", "verify", str(path), "--public-key", str(public))
    assert (code, err) == (0, "")
    assert out == (
        f"ok: checkpoint {answer['number']} signed by key {KEY.key_id}:"
        f" {answer['tree_size']} events, root {answer['root']}\n"
    )
    code, out, _ = run(
        capsys, "checkpoint", "verify", str(path), "--public-key", str(public), "--json"
    )
    assert canonical_line(out) == {"ok": True, "key_id": KEY.key_id} | {
        k: answer[k] for k in ("number", "tree_size", "root", "last_notification_id")
    }
    assert not nowhere.exists()


def forged(path: Path, change: dict[str, Any], in_checkpoint: bool = False) -> Path:
    exported = orjson.loads(path.read_bytes())
    if in_checkpoint:
        exported["checkpoint"] |= change
    else:
        exported |= change
    target = path.with_name("forged.json")
    target.write_bytes(canonical_json(exported))
    return target


def test_a_file_that_is_not_an_exported_checkpoint_is_one_line_exit_2(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    path = tmp_path / "witness.json"
    export(capsys, path)
    public = str(public_key_file(tmp_path))
    text = tmp_path / "note.txt"
    text.write_text("not json")
    cases = {
        text: f"checkpoint file {text} is neither an exported checkpoint (JSON) nor a note:",
        forged(path, {"extra": 1}): "is not an exported checkpoint: expected",
        forged(path, {"signature": "%%%"}): "signature is not base64",
        forged(path, {"tree_size": -1}, in_checkpoint=True): "checkpoint.tree_size: ",
        tmp_path / "missing.json": "cannot read checkpoint file",
    }
    for file, message in cases.items():
        code, out, err = run(capsys, "checkpoint", "verify", str(file), "--public-key", public)
        assert (code, out) == (2, ""), (file, err)
        assert_failure_line(err, "INVALID_INPUT")
        assert message in err, err


def test_a_forged_or_foreign_checkpoint_file_is_an_integrity_failure(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    path = tmp_path / "witness.json"
    export(capsys, path)
    public = str(public_key_file(tmp_path))
    exported = orjson.loads(path.read_bytes())
    cases = [
        ({"tree_size": exported["checkpoint"]["tree_size"] + 1}, True, "signature does not"),
        ({"key_id": "0123456789abcdef"}, False, "is signed by key 0123456789abcdef, not by"),
        ({"algorithm": "rsa"}, False, "is signed with 'rsa', not ed25519"),
    ]
    for change, in_checkpoint, message in cases:
        file = forged(path, change, in_checkpoint)
        code, out, err = run(capsys, "checkpoint", "verify", str(file), "--public-key", public)
        assert (code, out) == (1, ""), err
        assert_failure_line(err, "INTEGRITY_FAILURE")
        assert message in err, err


def test_a_store_rolled_back_to_an_older_copy_fails_only_against_an_exported_checkpoint(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    backup, head = save(cli_env, tmp_path)
    old = export(capsys, tmp_path / "old.json")  # nothing new: the backup holds this one too
    new_job(capsys, "3 + 4", "s2")
    path = tmp_path / "witness.json"
    kept = export(capsys, path)
    assert kept["number"] > old["number"]

    code, out, err = run(capsys, "verify", "--all", "--checkpoint", str(path))
    assert (code, err) == (0, "")
    assert out.splitlines()[1] == (
        f"the store extends checkpoint {kept['number']} of {path} (consistency proof from"
        f" {kept['tree_size']} to {kept['tree_size']} events holds)"
    )

    roll_back(cli_env, backup, head, old["number"])
    code, out, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")  # the limit: an intact older store verifies on its own
    code, out, err = run(capsys, "verify", "--all", "--checkpoint", str(path), "--json")
    assert code == 1
    reason = (
        f"the store does not extend checkpoint {kept['number']} of {path}: rolled back (its"
        f" newest checkpoint is {old['number']})"
    )
    assert canonical_line(out) == {
        "ok": False,
        "error_code": "INTEGRITY_FAILURE",
        "stream": str(CHECKPOINT_STREAM),
        "version": kept["number"],
        "reason": reason,
    }
    assert (
        err
        == f"mace: INTEGRITY_FAILURE: stream {CHECKPOINT_STREAM} version {kept['number']}:"
        + (f" {reason}\n")
    )

    # Written again from the older copy, the store has a checkpoint of that number: another one.
    new_job(capsys, "5 + 6", "s3")
    code, out, err = run(capsys, "verify", "--all", "--checkpoint", str(path))
    assert code == 1
    assert f"of {path}: rewritten (its checkpoint {kept['number']} is another)" in err


def test_prove_prints_a_consistency_proof_that_holds_between_two_exports(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    old = export(capsys, tmp_path / "old.json")
    new_job(capsys, "3 + 4", "s2")
    new_job(capsys, "5 + 6", "s3")
    new = export(capsys, tmp_path / "new.json")
    files = (str(tmp_path / "old.json"), str(tmp_path / "new.json"))
    code, out, err = run(capsys, "checkpoint", "prove", *files, "--json")
    assert (code, err) == (0, "")
    answer = canonical_line(out)
    assert answer["ok"] is True
    assert (answer["old"]["number"], answer["new"]["number"]) == (old["number"], new["number"])
    proof = [bytes.fromhex(node) for node in answer["proof"]]
    assert proof
    assert verify_consistency(
        old["tree_size"],
        new["tree_size"],
        bytes.fromhex(old["root"]),
        bytes.fromhex(new["root"]),
        proof,
    )
    code, out, err = run(capsys, "checkpoint", "prove", *files)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"consistency proof from checkpoint {old['number']} ({old['tree_size']} events) to"
        f" checkpoint {new['number']} ({new['tree_size']} events): {len(proof)} hashes",
        *answer["proof"],
    ]
    code, out, err = run(capsys, "checkpoint", "prove", *reversed(files))
    assert (code, out) == (2, "")
    assert "is newer than NEW" in err


def test_prove_fails_when_the_newer_checkpoint_does_not_extend_the_older(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    backup, head = save(cli_env, tmp_path)
    old_path, new_path = tmp_path / "old.json", tmp_path / "new.json"
    old = export(capsys, old_path)
    new_job(capsys, "3 + 4", "s2")
    export(capsys, old_path)  # OLD: a checkpoint of this branch of the log
    roll_back(cli_env, backup, head, old["number"])
    new_job(capsys, "5 + 6", "s3")  # another branch from the same older copy
    new_job(capsys, "7 + 8", "s4")
    export(capsys, new_path)
    code, out, err = run(capsys, "checkpoint", "prove", str(old_path), str(new_path), "--json")
    assert code == 1
    assert canonical_line(out)["ok"] is False
    error = canonical_line(err)["error"]
    assert error["code"] == "INTEGRITY_FAILURE"
    assert error["message"].endswith(
        f"checkpoint 3 of {new_path} does not extend checkpoint 2 of {old_path}:"
        " the consistency proof does not hold"
    )


def test_export_to_a_directory_that_does_not_exist_is_one_line_exit_2_and_writes_nothing(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
        ledger.jobs.start("uncovered", "s9", "1 + 1", {})  # export would checkpoint it first
    rows = RawTable(cli_env).execute("SELECT COUNT(*) FROM {table}")
    target = tmp_path / "nowhere" / "witness.json"
    code, out, err = run(capsys, "checkpoint", "export", "-o", str(target))
    assert (code, out) == (2, "")
    assert err == (
        f"mace: INVALID_INPUT: cannot write checkpoint file {target}: its directory does not"
        " exist\n"
    )
    assert RawTable(cli_env).execute("SELECT COUNT(*) FROM {table}") == rows
