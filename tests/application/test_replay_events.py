"""What a replay stores, on SQLite and PostgreSQL: three events, a job's first replay too.

The REPLAY_REQUEST, the attempt's replay record (one event: every step and the report) and the
REPLAY_RESULT. A job's first request opens the job's governance record itself
(`Governance.OpenedByReplay`), so no replay stores a fourth event to open it; a record a council
vote or an admin's request opened first gets the request appended.
"""

from __future__ import annotations

from eventsourcing.utils import get_topic
from support.ledger_fixtures import store_of

from domain.governance import Actor, Governance, Motion, Vote
from domain.job import CaptureMode
from domain.replay_access import ReplayMode
from domain.replay_record import ReplayRecord
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import ReplayResult

AUDITOR = Actor.of("aude", ["auditor"])
COUNCIL = Actor.of("cleo", ["council"])


def stored_by(ledger: Ledger, replay: ReplayMode, job_id: str) -> tuple[ReplayResult, list[str]]:
    """The replay's result, and the topics of the events it stored (by notification id)."""
    recorder = store_of(ledger).recorder
    before = recorder.max_notification_id() or 0
    result = ledger.replays.run(job_id, replay, AUDITOR)
    after = recorder.max_notification_id() or 0
    topics = [n.topic for n in recorder.select_notifications(before + 1, after - before)]
    assert len(topics) == after - before
    return result, topics


def test_a_first_and_a_second_replay_each_store_three_events(ledger: Ledger) -> None:
    job_id = ledger.jobs.run("2 + 3", "s1").job_id

    first, opened = stored_by(ledger, ReplayMode.AUDIT, job_id)
    second, appended = stored_by(ledger, ReplayMode.AUDIT, job_id)

    assert (first.attempt, second.attempt) == (1, 2)
    assert first.outcome.ok and second.outcome.ok
    record, result = get_topic(ReplayRecord.Opened), get_topic(Governance.ReplayResulted)
    assert opened == [get_topic(Governance.OpenedByReplay), result, record]
    assert appended == [get_topic(Governance.ReplayRequested), result, record]
    log = ledger.governance.log(job_id)
    assert [(e["event"], e["version"], e.get("attempt"), e.get("result")) for e in log] == [
        ("REPLAY_REQUEST", 1, 1, "recorded"),
        ("REPLAY_RESULT", 2, 1, None),
        ("REPLAY_REQUEST", 3, 2, "recorded"),
        ("REPLAY_RESULT", 4, 2, None),
    ]
    assert log[0].keys() == log[2].keys()  # the request that opened the record says as much
    store_of(
        ledger
    ).verify_all()  # every MAC, every stream contiguous from 1: else INTEGRITY_FAILURE


def test_a_refused_first_replay_stores_three_events_too(ledger: Ledger) -> None:
    """Production replay without the council's approval: refused, and recorded as any other."""
    job_id = ledger.jobs.run("2 + 3", "s1").job_id

    refused, topics = stored_by(ledger, ReplayMode.PRODUCTION, job_id)

    assert refused.outcome.error_code is not None
    assert refused.outcome.error_code.value == "ACCESS_DENIED"
    assert topics[0] == get_topic(Governance.OpenedByReplay) and len(topics) == 3
    [unanswered] = [e for e in ledger.governance.log(job_id) if e["event"] == "REPLAY_REQUEST"]
    assert (unanswered["attempt"], unanswered["result"]) == (1, "recorded")


def test_a_first_replay_after_a_vote_appends_its_request_to_the_record(ledger: Ledger) -> None:
    job_id = ledger.jobs.run("2 + 3", "s1", capture_mode=CaptureMode.FULL_IO).job_id
    ledger.governance.vote(job_id, Motion.PRODUCTION_REPLAY, Vote.APPROVE, COUNCIL)

    replayed, topics = stored_by(ledger, ReplayMode.PRODUCTION, job_id)

    assert (replayed.attempt, replayed.outcome.ok) == (1, True)  # approved on that record
    assert topics[0] == get_topic(Governance.ReplayRequested) and len(topics) == 3
    assert [e["event"] for e in ledger.governance.log(job_id)] == [
        "GOVERNANCE_OPENED",
        "COUNCIL_VOTE",
        "REPLAY_REQUEST",
        "REPLAY_RESULT",
    ]
