"""Rotating the checkpoint key, on SQLite and PostgreSQL, on stores as ``mace`` leaves them: the
earlier key's public half in ``MACE_CHECKPOINT_RETIRED_KEYS`` keeps the checkpoints it signed
verifying, the new key signs from then on, and the chain goes on unbroken across the rotation.
Without it, a new key is a configuration error (KEY_MISMATCH), never tampering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.checkpoint_chain import new_key_file
from support.cli_output import assert_failure_line, canonical_line
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, run
from support.replay_cli import new_job

from infrastructure.storage.keys.checkpoint_key import read_checkpoint_key
from infrastructure.storage.settings import Settings


def refused(capsys: pytest.CaptureFixture[str]) -> str:
    """``mace verify --all`` refused for its configuration (KEY_MISMATCH, exit 2): its line."""
    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (2, "")
    assert_failure_line(err, "KEY_MISMATCH")
    return err


def verified(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run(capsys, "verify", "--all", "--json")
    assert (code, err) == (0, ""), err
    return canonical_line(out)


def test_a_rotated_checkpoint_key_keeps_the_chain_with_the_retired_public_key(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    new_job(capsys)
    before = verified(capsys)
    witness = tmp_path / "witness.json"  # exported for a witness before the rotation
    assert run(capsys, "checkpoint", "export", "-o", str(witness))[0] == 0
    retired = tmp_path / "retired.pub"
    retired.write_text(read_checkpoint_key(TEST_CHECKPOINT_KEY).public_pem())
    path = new_key_file(tmp_path)
    rotated = read_checkpoint_key(path)
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(path))

    err = refused(capsys)
    assert "list the earlier key's public key in MACE_CHECKPOINT_RETIRED_KEYS" in err

    monkeypatch.setenv("MACE_CHECKPOINT_RETIRED_KEYS", str(retired))
    assert verified(capsys)["checkpoints"] == before["checkpoints"]
    new_job(capsys, "3 + 4", "s2")  # checkpointed on close, by the new key
    after = verified(capsys)
    assert after["checkpoints"] == before["checkpoints"] + 1
    # The witness's export, signed by the retired key, still holds the rotated store to it.
    code, out, err = run(capsys, "verify", "--all", "--checkpoint", str(witness), "--json")
    assert (code, err) == (0, ""), err
    assert canonical_line(out)["checkpoints"] == after["checkpoints"]
    code, out, err = run(capsys, "checkpoint", "public-key", "--json")
    assert (code, err) == (0, "")
    assert canonical_line(out)["key_id"] == rotated.key_id

    # The retired key is still needed: without it the older checkpoints do not verify.
    monkeypatch.delenv("MACE_CHECKPOINT_RETIRED_KEYS")
    refused(capsys)


def test_a_retired_key_that_cannot_be_read_is_one_line_naming_the_setting(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    new_job(capsys)
    private = tmp_path / "private.pem"
    private.write_bytes(TEST_CHECKPOINT_KEY.read_bytes())
    for path, problem in (
        (tmp_path / "absent.pub", f"cannot read {tmp_path / 'absent.pub'}: No such file"),
        (private, f"{private}: public key is not PEM"),
    ):
        monkeypatch.setenv("MACE_CHECKPOINT_RETIRED_KEYS", str(path))
        code, out, err = run(capsys, "verify", "--all")
        assert (code, out) == (2, "")
        assert err.startswith(f"mace: INVALID_INPUT: MACE_CHECKPOINT_RETIRED_KEYS: {problem}")
        assert err.count("\n") == 1
