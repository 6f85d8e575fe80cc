"""``mace demo``, the README's first command, on a first-time user's empty directory."""

from __future__ import annotations

from pathlib import Path

from support.ledger_fixtures import development_env, mace_process


def test_the_demo_runs_whole_and_warns_of_nothing_but_its_development_keys(
    tmp_path: Path,
) -> None:
    store = tmp_path / "mace.db"
    done = mace_process(development_env(f"sqlite:///{store}"), "demo")
    assert done.returncode == 0, done.stderr
    assert "REPLAY_DIVERGENCE" in done.stdout
    assert "INTEGRITY_FAILURE: the replay fails closed" in done.stdout
    # The scratch copy it tampers with is thrown away, never checkpointed (nor warned about).
    assert [line.split(" ")[:4] for line in done.stderr.splitlines()] == [
        ["mace:", "warning:", "created", "development"],
        ["mace:", "warning:", "created", "development"],
    ], done.stderr
    verified = mace_process(development_env(f"sqlite:///{store}"), "verify", "--all")
    assert verified.returncode == 0, verified.stderr
    assert "not yet checkpointed: 0" in verified.stdout
