"""A router rule refused for backtracking now may sit in a store written before it was: a job
recorded under it must still replay, on SQLite and PostgreSQL (issue 28, point 3)."""

from __future__ import annotations

import pytest

from domain.governance import Actor
from domain.job import CaptureMode
from domain.replay_access import ReplayMode
from domain.snapshot import Snapshot
from domain.stage0 import config
from infrastructure.application.ledger import Ledger

HOSTILE = {"rules": [{"rule_id": "R1", "pattern": "^(a+)+$", "agent": "math_agent", "why": "w"}]}


def test_a_job_recorded_under_a_rule_refused_now_still_replays(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored, _ = ledger.snapshots.put(Snapshot.declare("router", HOSTILE))
    with monkeypatch.context() as before_the_check:
        before_the_check.setattr(config, "backtracking_risk", lambda _pattern: None)
        log = ledger.jobs.run(
            "aaaa",
            "s1",
            job_id="old-1",
            capture_mode=CaptureMode.FULL_IO,
            snapshot_ids={"router": stored.snapshot_id},
        )
    assert log.completion is not None

    result = ledger.replays.run(
        "old-1", ReplayMode.PRODUCTION, Actor.of("ana", ["admin", "auditor"])
    )

    assert result.outcome.divergences == []
    assert (result.report["ok"], result.report["reproduced"]) == (True, True), result.markdown
    assert result.report["error_code"] is None
