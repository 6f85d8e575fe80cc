"""`ok` means reproduced (issue 27 point 6), on SQLite and PostgreSQL: a replay that ran to its end
without re-executing anything is stored, listed, measured and shown as no success.

The run is one an outside emitter could send: a tool call and its result, nothing the Stage-0
runtime can run again. Before, its REPLAY_RESULT said ``ok: true``, ``/metrics`` counted it a
success (rate 1.0) and the dashboard said "1 of 1 that ran".
"""

from __future__ import annotations

from typing import Any

import orjson
from support.api_support import Api, parse_metrics

from domain.events import hash_of
from domain.governance import Governance
from domain.run_file import parse_run
from infrastructure.application.ledger import Ledger
from projections.read_model_rows import REPLAY_OUTCOMES

SCHEMA = hash_of({"tool": "search"})


def outside_run(ledger: Ledger, job_id: str) -> None:
    """A run of one tool call and its result, recorded for tenant acme as ``mace ingest`` does."""
    lines: list[dict[str, Any]] = [
        {
            "type": "RunStarted",
            "job_id": job_id,
            "seed": "s1",
            "input": "capital of france",
            "snapshot_ids": ledger.snapshots.default_ids(),
            "capture_mode": "full_io",
        },
        {
            "type": "ToolCall",
            "call_id": "c1",
            "tool": "search",
            "tool_schema_hash": SCHEMA,
            "arguments": {"q": "capital of france"},
        },
        {"type": "ToolResult", "call_id": "c1", "status": "ok", "result": {"hits": ["paris"]}},
        {"type": "RunCompleted", "final_output": "paris"},
    ]
    run = parse_run([orjson.dumps(line) for line in lines])
    ledger.run_imports.record_once(run, tenant="acme")


def test_a_replay_that_reproduced_nothing_is_no_success_stored_listed_measured_or_shown(
    api: Api, ledger: Ledger
) -> None:
    outside_run(ledger, "outside")
    replayed = api.replay("outside", "audit", "admin_auditor")
    assert replayed.status_code == 200
    answer = replayed.json()
    assert (answer["ok"], answer["error"]) == (False, None)
    assert (answer["report"]["ok"], answer["report"]["reproduced"]) == (False, False)
    (result,) = [e for e in api.governance("outside") if e["event"] == "REPLAY_RESULT"]
    assert (result["ok"], result["error_code"]) == (False, None)
    (row,) = ledger.read_models.rows(REPLAY_OUTCOMES)
    assert (row["job_id"], row["outcome"]) == ("outside", "not_reproduced")

    reproduced = api.new_job(capture_mode="full_io")
    assert api.replay(reproduced, "audit", "admin_auditor").json()["ok"] is True

    metrics = parse_metrics(api.get("/metrics", "auditor").text)
    assert metrics.family("mace_replay_attempts_total") == {
        (("mode", "audit"), ("outcome", "not_reproduced"), ("tenant", "acme")): 1,
        (("mode", "audit"), ("outcome", "ok"), ("tenant", "acme")): 1,
    }
    assert metrics.family("mace_replay_successes_total") == {
        (("mode", "audit"), ("tenant", "acme")): 1
    }
    assert metrics.value("mace_replay_success_rate", tenant="acme") == 0.5
    page = api.get("/dashboard", "auditor")
    assert page.status_code == 200
    assert "1 of 2 that ran" in page.text
    assert '<span class="badge not_reproduced">not_reproduced</span>' in page.text


def test_old_replay_results_are_read_as_they_prove_never_rewritten() -> None:
    """A version 2 REPLAY_RESULT's ``ok`` said only that no error stopped the replay. Read now,
    it is ok only when it was also authoritative (a replay that re-ran nothing never was); the
    stored bytes stay as they are."""
    cases = [
        ({"ok": True, "authoritative": True}, True),
        ({"ok": True, "authoritative": False}, False),
        ({"ok": False, "authoritative": False}, False),
    ]
    for stored, read in cases:
        state = dict(stored)
        Governance.ReplayResulted.upcast_v2_v3(state)
        assert state["ok"] is read
