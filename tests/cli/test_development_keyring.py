"""The development keyring and checkpoint key are announced once per store: by the command
that creates them."""

from __future__ import annotations

from pathlib import Path

from support.ledger_fixtures import development_env, mace_process


def test_the_first_command_on_a_store_warns_of_its_development_keyring_and_the_next_does_not(
    tmp_path: Path,
) -> None:
    env = development_env(f"sqlite:///{tmp_path}/mace.db")
    keyring = tmp_path / "mace.db.keys.json"
    checkpoint_key = tmp_path / "mace.db.checkpoint-key.pem"

    first = mace_process(env, "init")
    assert first.returncode == 0, first.stderr
    assert first.stderr == (
        f"mace: warning: created development keyring {keyring}; set MACE_SIGNING_KEYS and"
        " MACE_ACTIVE_KEY_ID for real use\n"
        f"mace: warning: created development checkpoint key {checkpoint_key};"
        " set MACE_CHECKPOINT_KEY for real use\n"
    )
    assert keyring.exists() and checkpoint_key.exists()

    for argv in (("jobs",), ("verify", "--all")):
        again = mace_process(env, *argv)
        assert (again.returncode, again.stderr) == (0, ""), argv
