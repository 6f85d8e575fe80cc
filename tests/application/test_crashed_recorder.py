"""An agent that dies mid-run leaves an open run an operator sees and closes.

`RunRecorder` writes each event as it is emitted. The attack: a process records a few events and
is killed with SIGKILL before it completes. The run is then listed as open with those events
(``mace runs``, ``GET /v1/runs``), its events in its job, unsealed (an open job), an operator
abandons it (recorded: who and why; its job is never sealed, so it is never replayed), and the
whole ledger still verifies. On SQLite and
PostgreSQL, the store checkpointed by CLI writes before and after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import orjson
import pytest
from support.api_support import Api, assert_error, stage_event
from support.ledger_fixtures import run, subprocess_env
from support.sample_job import job_ids

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

STAGES = ("plan", "act", "check")
AGENT = f"""
import sys
from domain.events import RunStarted, StageTransition
from infrastructure.application.ledger import Ledger
from infrastructure.application.run_recorder import RunRecorder
from infrastructure.application.settings import Settings

ledger = Ledger.open(Settings())
recorder = RunRecorder(ledger.run_uploads, RunStarted(seed=7, input="file the report"))
for stage in {STAGES!r}:
    recorder.emit(StageTransition(to_stage=stage))
print(recorder.run_id, flush=True)
sys.stdin.read()  # the agent works on until it is killed
"""


def killed_agent(store_url: str) -> str:
    """Run the agent until it has emitted its events, SIGKILL it; the id of its run."""
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT],
        env=subprocess_env(store_url),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert agent.stdout is not None
    run_id = agent.stdout.readline().strip()
    os.kill(agent.pid, signal.SIGKILL)
    assert agent.wait() == -signal.SIGKILL
    assert run_id.startswith("run-"), agent.stderr.read() if agent.stderr else ""
    return run_id


def test_a_killed_agents_run_stays_open_and_an_operator_abandons_it(
    cli_env: Settings,
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run(capsys, "run", "2 + 2", "--seed", "s0")[0] == 0  # a checkpointed store
    run_id = killed_agent(store_url)

    code, out, err = run(capsys, "runs", "--json")
    assert code == 0, err
    (listed,) = [orjson.loads(line) for line in out.splitlines()]
    assert (listed["run_id"], listed["tenant"], listed["events"]) == (run_id, "default", 3)
    code, out, _ = run(capsys, "runs")
    assert out == f"{run_id}  open  3 events  tenant default\n"
    with Ledger.open(cli_env, create=False) as ledger:
        held = ledger.run_uploads.get(run_id, "default")
        assert held.job_id is not None
        stream = ledger.jobs.stream(held.job_id)  # the run's events, stored once: in its job
        assert [entry["payload"].get("to_stage") for entry in stream[1:]] == list(STAGES)
        assert not ledger.jobs.get(held.job_id).sealed
        jobs_before = job_ids(ledger)
        assert held.job_id in jobs_before  # listed, as an open job

    code, out, err = run(capsys, "runs", "abandon", run_id, "--reason", "agent died")
    assert (code, out) == (2, "")
    assert err.startswith("mace: INVALID_INPUT: set MACE_ACTOR")
    monkeypatch.setenv("MACE_ACTOR", "olga")
    monkeypatch.setenv("MACE_ROLES", "auditor")
    code, _, err = run(capsys, "runs", "abandon", run_id, "--reason", "agent died")
    assert code == 1 and err.startswith("mace: ACCESS_DENIED: this needs one of the roles")
    monkeypatch.setenv("MACE_ROLES", "operator")
    code, out, err = run(capsys, "runs", "abandon", run_id, "--reason", "agent died", "--json")
    assert code == 0, err
    assert orjson.loads(out) == {"run_id": run_id, "status": "abandoned", "events": 3}

    assert run(capsys, "runs")[1] == "no open run\n"
    with Ledger.open(cli_env, create=False) as ledger:
        closed = ledger.run_uploads.get(run_id, "default")
        assert closed.abandoned_by == {"actor_id": "olga", "roles": ["operator"]}
        assert closed.abandon_reason == "agent died"
        assert job_ids(ledger) == jobs_before  # its job stays, unsealed: never replayed
    code, out, err = run(capsys, "jobs", "--status", "abandoned", "--json")
    assert code == 0, err
    assert [job["job_id"] for job in orjson.loads(out)["jobs"]] == [held.job_id]
    code, out, err = run(capsys, "verify", "--all")
    assert code == 0, out + err


def test_an_open_run_is_listed_over_http_and_abandoned_by_an_operator(api: Api) -> None:
    run_id = api.open_run({"type": "RunStarted", "seed": 7, "input": "work"})
    assert api.send(run_id, [stage_event("e1"), stage_event("e2", "act")]).status_code == 200
    listed = api.get("/v1/runs").json()["runs"]
    assert [(r["run_id"], r["events"]) for r in listed] == [(run_id, 2)]
    job_id = api.ledger.run_uploads.get(run_id, "acme").job_id

    def listed_as(status: str) -> list[str]:
        response = api.get(f"/v1/jobs?status={status}")
        assert response.status_code == 200, response.content
        return [job["job_id"] for job in response.json()["jobs"]]

    assert (listed_as("open"), listed_as("abandoned")) == ([job_id], [])
    assert api.get("/v1/runs", "beta_admin_auditor").json() == {"runs": []}  # acme's run

    reason = {"reason": "agent died"}
    assert_error(api.post(f"/v1/runs/{run_id}/abandon", reason, "auditor"), 403, "ACCESS_DENIED")
    empty = api.post(f"/v1/runs/{run_id}/abandon", {"reason": ""})
    assert_error(empty, 422, "INVALID_INPUT", field="body.reason")
    response = api.post(f"/v1/runs/{run_id}/abandon", reason)
    assert response.status_code == 200, response.content
    assert response.json() == {"run_id": run_id, "status": "abandoned", "events": 2}
    position = api.position()
    assert api.post(f"/v1/runs/{run_id}/abandon", reason).status_code == 200  # again: no-op
    assert api.position() == position
    assert api.get("/v1/runs").json() == {"runs": []}
    assert api.get(f"/v1/runs/{run_id}").json()["status"] == "abandoned"
    # Its job is listed as abandoned, never as open (it will never complete).
    assert (listed_as("open"), listed_as("abandoned")) == ([], [job_id])

    late = api.send(run_id, [stage_event("e3")])
    assert_error(late, 409, "CONFLICT", f"run {run_id} is abandoned: no more events may be added")
    completion = api.post(f"/v1/runs/{run_id}/complete", {"final_output": "x"})
    assert_error(completion, 409, "CONFLICT", f"run {run_id} was abandoned: it cannot be completed")
    assert api.position() == position


def test_a_completed_run_cannot_be_abandoned(api: Api) -> None:
    run_id = api.open_run({"type": "RunStarted", "seed": 8, "input": "done"})
    assert api.post(f"/v1/runs/{run_id}/complete", {"final_output": "ok"}).status_code == 200
    response = api.post(f"/v1/runs/{run_id}/abandon", {"reason": "too late"})
    message = f"run {run_id} is completed: it is a job and cannot be abandoned"
    assert_error(response, 409, "CONFLICT", message)
