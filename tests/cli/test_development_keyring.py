"""The development keyring is announced once per store: by the command that creates it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MACE = "import sys; from infrastructure.cli import main; sys.exit(main())"


def mace(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", MACE, *argv], env=env, capture_output=True, text=True, check=False
    )


def test_the_first_command_on_a_store_warns_of_its_development_keyring_and_the_next_does_not(
    tmp_path: Path,
) -> None:
    unset = {name: value for name, value in os.environ.items() if not name.startswith("MACE_")}
    env = unset | {"MACE_STORE": f"sqlite:///{tmp_path}/mace.db"}
    keyring = tmp_path / "mace.db.keys.json"

    first = mace(env, "init")
    assert first.returncode == 0, first.stderr
    assert first.stderr == (
        f"mace: warning: created development keyring {keyring}; set MACE_SIGNING_KEYS and"
        " MACE_ACTIVE_KEY_ID for real use\n"
    )
    assert keyring.exists()

    for argv in (("jobs",), ("verify", "--all")):
        again = mace(env, *argv)
        assert (again.returncode, again.stderr) == (0, ""), argv
