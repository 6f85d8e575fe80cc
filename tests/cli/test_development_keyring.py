"""The development keyring is announced once per store: by the command that creates it."""

from __future__ import annotations

from pathlib import Path

from support.ledger_fixtures import development_env, mace_process


def test_the_first_command_on_a_store_warns_of_its_development_keyring_and_the_next_does_not(
    tmp_path: Path,
) -> None:
    env = development_env(f"sqlite:///{tmp_path}/mace.db")
    keyring = tmp_path / "mace.db.keys.json"

    first = mace_process(env, "init")
    assert first.returncode == 0, first.stderr
    assert first.stderr == (
        f"mace: warning: created development keyring {keyring}; set MACE_SIGNING_KEYS and"
        " MACE_ACTIVE_KEY_ID for real use\n"
    )
    assert keyring.exists()

    for argv in (("jobs",), ("verify", "--all")):
        again = mace_process(env, *argv)
        assert (again.returncode, again.stderr) == (0, ""), argv
