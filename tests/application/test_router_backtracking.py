"""A router rule refused for backtracking now may sit in a store written before it was: a job
recorded under it must still replay, on SQLite and PostgreSQL (issue 28, point 3)."""

from __future__ import annotations

import pytest
from support.ledger_fixtures import store_of

from domain.governance import Actor
from domain.job import CaptureMode
from domain.replay_access import ReplayMode
from domain.snapshot import Snapshot
from domain.stage0 import config, router
from domain.stage0.router import UnroutableText
from infrastructure.application.errors import failure_of
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


def test_a_recorded_rule_too_costly_for_its_input_ends_the_replay_with_replay_timeout(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded before the checks, on 40 `a`s (its run matched at once, without backtracking),
    ``^(a+)+$`` could take 2**40 steps to re-decide: the replay stops at once, bounded by shape
    and length, REPLAY_TIMEOUT on record, and the service is never held up. Checkpointed, as
    a CLI write leaves the store."""
    stored, _ = ledger.snapshots.put(Snapshot.declare("router", HOSTILE))
    with monkeypatch.context() as before_the_check:
        before_the_check.setattr(config, "backtracking_risk", lambda _pattern: None)
        before_the_check.setattr(router, "check_routable", lambda _config, _text: None)
        ledger.jobs.run(
            "a" * 40,
            "s1",
            job_id="old-2",
            capture_mode=CaptureMode.FULL_IO,
            snapshot_ids={"router": stored.snapshot_id},
        )
    ledger.checkpoints.write()

    result = ledger.replays.run(
        "old-2", ReplayMode.PRODUCTION, Actor.of("ana", ["admin", "auditor"])
    )

    message = (
        "routing budget: job input: 40 characters, at most 6 under this router: rule R1"
        " ('^(a+)+$') may take time growing exponentially"
    )
    assert (result.report["ok"], result.report["error_code"]) == (False, "REPLAY_TIMEOUT")
    assert result.outcome.error_message == message
    assert result.outcome.steps[-1].as_json() == {
        "step": "8 iteration 0: limits",
        "outcome": "failed",
        "detail": f"REPLAY_TIMEOUT: {message}",
    }


def test_a_new_job_longer_than_its_router_can_route_in_bounded_time_is_refused(
    ledger: Ledger,
) -> None:
    """``\\s+$`` is accepted (one repeated part); on 100,000 spaces Python's re takes 60 s, so a
    job under it routes at most 3,162 characters: one line, INVALID_INPUT, nothing written."""
    quadratic = {"rules": [{**HOSTILE["rules"][0], "pattern": r"\s+$"}]}
    stored, _ = ledger.snapshots.put(Snapshot.declare("router", quadratic))
    before = store_of(ledger).recorder.max_notification_id()

    with pytest.raises(UnroutableText) as refused:
        ledger.jobs.run(
            " " * 3162 + "!", "s1", job_id="long-1", snapshot_ids={"router": stored.snapshot_id}
        )

    failure = failure_of(refused.value)
    assert failure is not None
    assert failure.code == "INVALID_INPUT"
    assert str(refused.value) == (
        "job input: 3163 characters, at most 3162 under this router: rule R1 ('\\\\s+$') may"
        " take time growing as n**2"
    )
    assert store_of(ledger).recorder.max_notification_id() == before
    assert not ledger.jobs.exists("long-1")
