"""The replay time cap (seed 000 section 12) holds across every step of a replay, retrieval
re-runs included, not only between iterations; a replay it stops is on record as REPLAY_TIMEOUT
(its signed REPLAY_RESULT and its replay record). On SQLite and PostgreSQL.

The elapsed time is the ops clock's (`ReplayRequest.elapsed`); here a test clock that says the
cap is long past from a chosen moment on.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from domain.events import hash_of
from domain.governance import Actor
from domain.replay_access import ReplayMode
from domain.retrieval import ledger_hits
from domain.run_file import parse_run
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import ReplayResult

ANA = Actor.of("ana", ["admin", "auditor"])
CAP = "replay time cap 60 s (governance snapshot) exceeded"
QUERY = "when is the launch"


def ingest(ledger: Ledger, job_id: str, body: list[dict[str, Any]]) -> None:
    started = {
        "type": "RunStarted",
        "job_id": job_id,
        "seed": "s1",
        "input": "when is the launch",
        "snapshot_ids": ledger.snapshots.default_ids(),
        "capture_mode": "full_io",
    }
    lines = [started, *body, {"type": "RunCompleted", "final_output": "friday"}]
    ledger.run_imports.record_once(parse_run([orjson.dumps(line) for line in lines]))


def assert_timed_out(ledger: Ledger, result: ReplayResult, step: str) -> None:
    outcome = result.outcome
    assert outcome.error_code is not None
    assert (outcome.error_code.value, outcome.error_message) == ("REPLAY_TIMEOUT", CAP)
    assert outcome.steps[-1].as_json() == {
        "step": step,
        "outcome": "failed",
        "detail": f"REPLAY_TIMEOUT: {CAP}",
    }
    (on_record,) = [
        e for e in ledger.governance.log(result.report["job_id"]) if e["event"] == "REPLAY_RESULT"
    ]
    assert (on_record["ok"], on_record["error_code"]) == (False, "REPLAY_TIMEOUT")
    stored = ledger.replays.record(result.report["job_id"], result.attempt)
    assert stored.steps[-1] == outcome.steps[-1].as_json()


def test_a_job_with_no_iteration_is_held_to_the_time_cap(ledger: Ledger) -> None:
    """Before, the cap was read only between iterations: a run with none ran unbounded."""
    call = {
        "type": "ToolCall",
        "call_id": "c1",
        "tool": "search",
        "tool_schema_hash": hash_of({"tool": "search"}),
        "arguments": {"q": QUERY},
    }
    result_line = {"type": "ToolResult", "call_id": "c1", "status": "ok", "result": ["friday"]}
    ingest(ledger, "tools-only", [call, result_line])

    result = ledger.replays.run("tools-only", ReplayMode.AUDIT, ANA, elapsed=lambda: 1e9)

    # The cap is the governance snapshot's: known once its signature is verified.
    assert_timed_out(ledger, result, "3 snapshot signatures: limits")


def test_retrieval_re_runs_are_held_to_the_time_cap(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two retrievals served again from the tenant's memories; the cap passes while the first is
    served: the second is never started."""
    memory = ledger.memories.remember_episode("default", "the launch is friday", [], ANA, None)
    position = memory.as_json()["position"]
    memories = ledger.memories.live_at("default", position)
    assert memories is not None
    hits = ledger_hits("default", memories, QUERY, 10)  # as the ledger served them
    body: list[dict[str, Any]] = []
    for request_id in ("r1", "r2"):
        body += [
            {
                "type": "RetrievalRequest",
                "request_id": request_id,
                "query": QUERY,
                "request_hash": hash_of(QUERY),
                "memory_position": position,
            },
            {"type": "RetrievalResponse", "request_id": request_id, "hits": hits},
        ]
    ingest(ledger, "retrieved", body)
    served: list[int] = []
    live_at = ledger.memories.live_at

    def serving(tenant: str, at: int) -> Any:
        served.append(at)
        return live_at(tenant, at)

    monkeypatch.setattr(ledger.memories, "live_at", serving)

    result = ledger.replays.run(
        "retrieved", ReplayMode.AUDIT, ANA, elapsed=lambda: 1e9 if served else 0.0
    )

    assert served == [position]
    assert_timed_out(ledger, result, "6b outside facts: retrieval event 2: limits")
