"""``mace-harness reexecute``: the client distribution's command, run as an agent team's CI runs it
(its console script, in the agent's project directory) against a live ``mace serve``, on both
stores. Exit 0 on an authoritative match, 1 on a divergence with its step and diff, 2 on code that
cannot be loaded (nothing recorded). The job is recorded by a ledger that closed (checkpointed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.harness_agent import recorded

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from infrastructure.tooling.load_server import TENANT, ServiceProcess, make_token

TESTS = Path(__file__).resolve().parents[1]
COMMAND = str(Path(sys.executable).with_name("mace-harness"))


def client(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """``mace-harness *argv`` from the agent's project directory (its code imported from there)."""
    return subprocess.run(
        [COMMAND, *argv],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_client_command_exits_0_on_a_match_1_on_a_divergence_2_on_bad_code(
    settings: Settings, tmp_path: Path
) -> None:
    with Ledger.open(settings) as writer:
        job_id = recorded(writer, tenant=TENANT)
    token = make_token(tmp_path / "tokens.json")
    plain = {k: v for k, v in os.environ.items() if not k.startswith("MACE_")}
    with ServiceProcess(settings, tmp_path / "tokens.json", tmp_path / "serve.log") as service:
        service.start()
        by_flags = ["--url", service.base_url, "--token", token]
        unchanged = client(
            plain,
            "reexecute",
            job_id,
            "--agent",
            "support.ticket_agent:agent",
            "--input",
            "42",
            *by_flags,
        )
        by_env = plain | {"LEDGER_URL": service.base_url, "LEDGER_TOKEN": token}
        changed = client(
            by_env,
            "reexecute",
            job_id,
            "--agent",
            "support.reexecuted_code:ticket_agent_changed",
            "--input",
            "42",
        )
        # Without --input, the code is given the recorded run's input: "ticket 42".
        recorded_input = client(
            by_env, "reexecute", job_id, "--agent", "support.ticket_agent:agent"
        )
        bad = client(by_env, "reexecute", job_id, "--agent", "support.ticket_agent:nothing")
    assert (unchanged.returncode, unchanged.stderr) == (0, ""), unchanged.stdout
    assert unchanged.stdout.startswith("verdict: REPRODUCED, authoritative\n"), unchanged.stdout
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert changed.stdout.startswith("verdict: FAILED REPLAY_DIVERGENCE"), changed.stdout
    assert (
        "  REPLAY_DIVERGENCE at iteration 1, field tool_call.arguments:\n"
        '    recorded: {"q":"42"}\n'
        '    replayed: {"limit":3,"q":"42"}\n'
    ) in changed.stdout
    assert changed.stderr.startswith("mace-harness: REPLAY_DIVERGENCE: "), changed.stderr
    assert recorded_input.returncode == 1, recorded_input.stdout + recorded_input.stderr
    assert (
        "  REPLAY_DIVERGENCE at iteration 0, field model_call.prompt:\n"
        '    recorded: {"content":"plan for 42","role":"user"}\n'
        '    replayed: {"content":"plan for ticket 42","role":"user"}\n'
    ) in recorded_input.stdout
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == (
        "mace-harness: INVALID_INPUT: --agent 'support.ticket_agent:nothing':"
        " support.ticket_agent has no attribute 'nothing'\n"
    )
    with Ledger.open(settings, create=False) as ledger:
        results = [
            (e["ok"], e["error_code"])
            for e in ledger.governance.log(job_id, tenant=TENANT)
            if e["event"] == "REPLAY_RESULT"
        ]
    assert results == [(True, None), (False, "REPLAY_DIVERGENCE"), (False, "REPLAY_DIVERGENCE")]
