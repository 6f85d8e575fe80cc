"""``mace demo``, the README's first command, on a first-time user's empty directory; and without
the ``agents`` extra, which only its framework agent part needs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.ledger_fixtures import development_env, mace_process, settings_for

import infrastructure.tooling
from infrastructure.application.ledger import Ledger
from infrastructure.tooling.demo import run_demo

FRAMEWORK_PART = """\
   a) unchanged: mace reexecute {job}... --agent infrastructure.tooling.demo_agent:run_as_recorded
      -> REPRODUCED, authoritative; of 3 facts: 3 re-executed and matched, 0 compared by hash, \
0 taken as recorded, 0 missing
   b) changed, get_weather now takes units (default metric):
      mace reexecute {job}... --agent infrastructure.tooling.demo_agent:run_changed
      -> FAILED REPLAY_DIVERGENCE, authoritative; of 3 facts: 1 re-executed and matched, \
0 compared by hash, 0 taken as recorded, 0 missing, 1 diverged, 1 not checked
      iteration 1, field tool_call.arguments:
        recorded: {{"city":"Paris"}}
        replayed: {{"city":"Paris","units":"metric"}}
"""


def test_the_demo_runs_whole_and_warns_of_nothing_but_its_development_keys(
    tmp_path: Path,
) -> None:
    store = tmp_path / "mace.db"
    done = mace_process(development_env(f"sqlite:///{store}"), "demo")
    assert done.returncode == 0, done.stderr
    assert "REPLAY_DIVERGENCE" in done.stdout
    assert "INTEGRITY_FAILURE: the replay fails closed" in done.stdout
    # The framework agent, recorded through the OTLP intake: its audit replay takes the model's
    # and the tools' answers as recorded; its code re-executed matches, then changed diverges
    # at the tool call.
    assert "4. An OpenAI Agents SDK agent" in done.stdout
    [job] = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("   job ")]
    assert "mace verify: ok, 7 events, sealed: True" in done.stdout
    assert "mace replay (audit): NOT REPRODUCED" in done.stdout
    assert "5 taken as recorded (only the run vouches for them)" in done.stdout
    assert FRAMEWORK_PART.format(job=job[:16]) in done.stdout
    # The scratch copy it tampers with is thrown away, never checkpointed (nor warned about).
    assert [line.split(" ")[:4] for line in done.stderr.splitlines()] == [
        ["mace:", "warning:", "created", "development"],
        ["mace:", "warning:", "created", "development"],
    ], done.stderr
    verified = mace_process(development_env(f"sqlite:///{store}"), "verify", "--all")
    assert verified.returncode == 0, verified.stderr
    assert "not yet checkpointed: 0" in verified.stdout


def test_without_the_agents_extra_the_demo_shows_the_rest_and_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Agents SDK is not installed: importing it fails, as on a machine without the extra.
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "infrastructure.tooling.demo_agent", raising=False)
    monkeypatch.delattr(infrastructure.tooling, "demo_agent", raising=False)
    said: list[str] = []
    with Ledger.open(settings_for(f"sqlite:///{tmp_path / 'mace.db'}")) as ledger:
        assert run_demo(ledger, said.append)
    assert "      INTEGRITY_FAILURE: the replay fails closed" in said
    [line] = [line for line in said if line.startswith("4. ")]
    assert line == (
        "4. An OpenAI Agents SDK agent recorded through OTLP and re-executed: needs the agents"
        " extra (agents is not installed): pip install '.[agents]' in the ledger's repository"
    )
    assert not any("mace reexecute" in line for line in said)
