"""An agent team's side of re-execution: its own process, the ``mace-harness`` client only,
against a live ``mace serve``, on both stores.

The agent runs in ``python -I`` (no PYTHONPATH, no user site, no script directory), imports its
own code (`support.ticket_agent`) and the client, re-executes the recorded job unchanged and
changed, and says which modules it loaded: none of the ledger's packages nor of its server's
dependencies. The job is recorded by a ledger that closed (checkpointed), as a CLI write leaves it.
Then the service is killed with a re-execution open: its request stays without a result and
reads as abandoned, never as a match.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
from support.harness_agent import recorded

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from infrastructure.tooling.load_server import TENANT, ServiceProcess, make_token

TESTS = Path(__file__).resolve().parents[1]
LEDGER_SIDE = {
    # The ledger's own packages, and what its server runs on.
    "domain",
    "projections",
    "infrastructure",
    "eventsourcing",
    "psycopg",
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "orjson",
    "cryptography",
}

AGENT_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])  # the agent's own code
from mace_harness import ReplayDiverged, replay_harness
from support.ticket_agent import agent

url, token, job_id = sys.argv[2:5]
with replay_harness(url, token, job_id) as h:
    h.final_output(agent(h, "42"))
unchanged = h.result.outcome

class Changed:
    def __init__(self, h):
        self.h = h
    def model_call(self, model_id, prompt):
        return self.h.model_call(model_id, prompt)
    def tool_call(self, name, arguments):
        return self.h.tool_call(name, {**arguments, "limit": 3})  # the code change
    def retrieve(self, query):
        return self.h.retrieve(query)

try:
    with replay_harness(url, token, job_id) as h:
        agent(Changed(h), "42")
    diverged = None
except ReplayDiverged as failure:
    diverged = failure.divergence.as_json()
print(json.dumps({
    "unchanged": [unchanged.ok, unchanged.authoritative, unchanged.error_code],
    "changed": [h.result.outcome.ok, h.result.outcome.error_code],
    "diverged": diverged,
    "modules": sorted({name.split(".")[0] for name in sys.modules}),
}))
"""


def test_an_agent_process_with_the_client_only_reexecutes_over_http(
    settings: Settings, tmp_path: Path
) -> None:
    with Ledger.open(settings) as writer:
        job_id = recorded(writer, tenant=TENANT)
    token = make_token(tmp_path / "tokens.json")
    with ServiceProcess(settings, tmp_path / "tokens.json", tmp_path / "serve.log") as service:
        service.start()
        agent = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                AGENT_PROCESS,
                str(TESTS),
                service.base_url,
                token,
                job_id,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        # A third re-execution left open when the service is killed outright (no shutdown).
        opened = httpx.post(
            f"{service.base_url}/v1/reexecutions",
            json={"job_id": job_id},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert opened.status_code == 201, opened.content
        assert service.process is not None
        service.process.kill()
        service.process.wait(timeout=60)
    assert agent.returncode == 0, agent.stderr
    said = json.loads(agent.stdout)
    assert said["unchanged"] == [True, True, None]
    assert said["changed"] == [False, "REPLAY_DIVERGENCE"]
    assert said["diverged"] == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 1,
        "field": "tool_call.arguments",
        "recorded": {"q": "42"},
        "replayed": {"limit": 3, "q": "42"},
    }
    assert "mace_harness" in said["modules"]
    assert LEDGER_SIDE.isdisjoint(said["modules"]), LEDGER_SIDE & set(said["modules"])
    with Ledger.open(settings, create=False) as ledger:
        results = [
            (e["ok"], e["error_code"])
            for e in ledger.governance.log(job_id, tenant=TENANT)
            if e["event"] == "REPLAY_RESULT"
        ]
        unanswered = [u.as_json() for u in ledger.governance.unanswered_replays()]
    assert results == [(True, None), (False, "REPLAY_DIVERGENCE")]
    # Lost with the process: no result, its lease gone with it, so it reads as abandoned.
    assert [(u["attempt"], u["status"]) for u in unanswered] == [(3, "abandoned")]
