"""The README's main-job command works as written (every other example, the Python API's
included, is run by tests/docs/test_examples.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import orjson
import pytest

from infrastructure.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)\n```", README, re.S)


@pytest.fixture
def fresh_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with no MACE_* settings: the embedded default."""
    for name in ("MACE_STORE", "MACE_SIGNING_KEYS", "MACE_ACTIVE_KEY_ID", "MACE_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_main_job_command_runs_on_the_sqlite_default(
    fresh_directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = blocks("bash")[0].split(" && ")
    mace_steps = [shlex.split(step)[1:] for step in steps if step.startswith(".venv/bin/mace ")]
    assert mace_steps == [["demo"]]
    assert main(mace_steps[0]) == 0
    out = capsys.readouterr().out
    assert "-> 2 + 3 = 5" in out
    assert "-> Your favorite color is blue." in out
    assert out.count("  REPRODUCED, authoritative; of ") == 5
    assert "mace replay " in out and "-> REPLAY_DIVERGENCE" in out
    assert '"rule_id":"R1"' in out and '"rule_id":"R4"' in out
    assert "INTEGRITY_FAILURE: the replay fails closed" in out
    assert "-> REPRODUCED, authoritative; of 3 facts" in out
    assert "-> FAILED REPLAY_DIVERGENCE" in out and "field tool_call.arguments:" in out
    assert "Next:" in out
    assert (fresh_directory / "mace.db").exists()
    # The user's own ledger is intact: the tampering happened on a scratch copy.
    assert main(["verify", "--all"]) == 0
    # The five Stage-0 jobs, and the framework agent's, recorded from its OTLP export: its
    # model calls carry no temperature (the agent left the provider's default), so production
    # replay cannot redo it, as the demo says.
    assert re.search(r"\(6 jobs, 6 sealed\)", capsys.readouterr().out)
    assert main(["jobs", "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)["jobs"]
    assert [job["replayable"] for job in listed] == [True] * 5 + [False]
