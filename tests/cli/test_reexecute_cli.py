"""``mace reexecute JOB --agent module:callable``: an agent's code re-executed against its
recording, as a CI job runs it. Exit 0 on an authoritative match, 1 on a divergence (the step, the
field and the diff printed) or a refusal, 2 on a callable that cannot be loaded or an unknown job,
nothing recorded then.

The job is the demo's OpenAI Agents SDK agent, recorded through the OTLP intake by a ledger that
closed (checkpointed, as every CLI write leaves the store). On SQLite and PostgreSQL.
"""

from __future__ import annotations

import orjson
import pytest
from support.ledger_fixtures import run

from domain.canonical import canonical_json
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from infrastructure.tooling.demo_agent import QUESTION, record_through_otlp

pytestmark = pytest.mark.storage

AGENT = "infrastructure.tooling.demo_agent"


@pytest.fixture
def job_id(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> str:
    """The agent's run, recorded for tenant acme; the command acts as an auditor."""
    monkeypatch.setenv("MACE_ACTOR", "aude")
    monkeypatch.setenv("MACE_ROLES", "auditor")
    with Ledger.open(cli_env) as ledger:
        log = record_through_otlp(ledger, "acme").log
    assert log is not None
    return log.job_id


def reexecute(
    capsys: pytest.CaptureFixture[str], job_id: str, code: str, *more: str
) -> tuple[int, str, str]:
    """``mace reexecute JOB --agent CODE --tenant acme *more``."""
    return run(capsys, "reexecute", job_id, "--agent", code, "--tenant", "acme", *more)


def attempts(settings: Settings, job_id: str) -> list[str]:
    """The job's governance log, event by event: every attempt is a request, then a result."""
    with Ledger.open(settings, create=False) as ledger:
        return [e["event"] for e in ledger.governance.log(job_id, tenant="acme")]


def test_the_agent_unchanged_exits_0_with_an_authoritative_match(
    job_id: str,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = reexecute(capsys, job_id, f"{AGENT}:run_as_recorded")
    assert (code, err) == (0, ""), out
    assert out.startswith("verdict: REPRODUCED, authoritative; of 3 facts: 3 re-executed"), out
    assert attempts(cli_env, job_id) == ["REPLAY_REQUEST", "REPLAY_RESULT"]
    production = ("--input", QUESTION, "--mode", "production", "--json")
    # Production is for an admin and auditor: an auditor alone is refused, exit 1, recorded.
    code, out, err = reexecute(capsys, job_id, f"{AGENT}:run_as_recorded", *production)
    assert (code, out) == (1, "")
    assert orjson.loads(err)["error"]["code"] == "ACCESS_DENIED"
    assert attempts(cli_env, job_id)[2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]
    # --json: the recorded report, canonical; the input is the recorded run's unless given.
    monkeypatch.setenv("MACE_ROLES", "admin,auditor")
    code, out, err = reexecute(capsys, job_id, f"{AGENT}:run_as_recorded", *production)
    report = orjson.loads(out)
    assert (code, err, out) == (0, "", canonical_json(report).decode() + "\n")
    assert (report["mode"], report["ok"], report["authoritative"]) == ("production", True, True)
    assert report["attempt"] == 3


def test_a_change_that_calls_a_tool_with_other_arguments_exits_1_with_the_step(
    job_id: str, cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = reexecute(capsys, job_id, f"{AGENT}:run_changed")
    assert code == 1, out
    assert out.startswith("verdict: FAILED REPLAY_DIVERGENCE, authoritative; of 3 facts"), out
    assert (
        "  REPLAY_DIVERGENCE at iteration 1, field tool_call.arguments:\n"
        '    recorded: {"city":"Paris"}\n'
        '    replayed: {"city":"Paris","units":"metric"}\n'
    ) in out
    assert err.startswith("mace: REPLAY_DIVERGENCE: "), err
    assert attempts(cli_env, job_id) == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_other_input_gives_another_final_answer_or_other_calls_and_exits_1(
    job_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = reexecute(
        capsys, job_id, f"{AGENT}:run_as_recorded", "--input", "What is the weather in Rome?"
    )
    assert code == 1, out
    assert "REPLAY_DIVERGENCE at iteration 0, field model_call.prompt:" in out


def test_code_that_raises_exits_1_as_a_divergence_where_it_stood(
    job_id: str, cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = reexecute(capsys, job_id, "support.reexecuted_code:raises")
    assert code == 1, out
    assert "field agent:" in out and "raised RuntimeError: the agent broke" in out
    assert err.startswith("mace: REPLAY_DIVERGENCE: "), err
    assert attempts(cli_env, job_id) == ["REPLAY_REQUEST", "REPLAY_RESULT"]


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        (f"{AGENT}.run_as_recorded", "expected MODULE:CALLABLE"),
        (f"{AGENT}:", "expected MODULE:CALLABLE"),
        ("no_such_module_here:run", "cannot import no_such_module_here: No module named"),
        ("support.reexecuted_code_broken:run", "cannot import support.reexecuted_code_broken"),
        (f"{AGENT}:no_such_callable", f"{AGENT} has no attribute 'no_such_callable'"),
        (f"{AGENT}:QUESTION", "is not callable"),
        ("support.reexecuted_code:takes_one", "cannot be called with (harness, input)"),
    ],
)
def test_a_callable_that_cannot_be_loaded_exits_2_and_records_nothing(
    agent: str, said: str, job_id: str, cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = reexecute(capsys, job_id, agent)
    assert (code, out) == (2, "")
    assert err.startswith(f"mace: INVALID_INPUT: --agent {agent!r}: ") and said in err, err
    assert len(err.splitlines()) == 1
    assert attempts(cli_env, job_id) == []


def test_an_unknown_job_exits_2_and_records_nothing(
    job_id: str, cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    # Another tenant's job is a free id.
    code, out, err = run(capsys, "reexecute", job_id, "--agent", f"{AGENT}:run_as_recorded")
    assert (code, out) == (2, "")
    assert err.startswith("mace: NOT_FOUND: "), err
    assert attempts(cli_env, job_id) == []
