"""Read models: projections of the log with tracking records, rebuilt from zero to the same digests.

Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from threading import Event, Thread

import pytest
from eventsourcing.persistence import TrackingRecorder
from support.ledger_fixtures import RawTable, run, store_of

from domain.governance import Actor
from domain.job import DEFAULT_TENANT, CaptureMode, Job
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.storage.read_models.tables import TABLE
from infrastructure.storage.settings import Settings, SQLiteStore
from projections.read_model_rows import (
    HALTED_SNAPSHOTS,
    JOB_INDEX,
    NON_REPLAYABLE,
    PROJECTION,
    PROJECTION_VERSION,
    RECEIPT_INDEX,
    REPLAY_OUTCOMES,
    TOPICS,
    VIEWS,
)

AUDITOR = Actor.of("ana", ["admin", "auditor"])


def record_some(ledger: Ledger) -> list[str]:
    """Two replayable jobs (full_io) and one that kept nothing (capture mode none)."""
    ids = [
        ledger.jobs.run("2 + 3", "s1", capture_mode=CaptureMode.FULL_IO).job_id,
        ledger.jobs.run("my favorite color is blue", "s1", capture_mode=CaptureMode.FULL_IO).job_id,
        ledger.jobs.run("what is my favorite color", "s1", capture_mode=CaptureMode.NONE).job_id,
    ]
    ledger.replays.run(ids[0], ReplayMode.PRODUCTION, AUDITOR)
    ledger.replays.run(ids[2], ReplayMode.PRODUCTION, AUDITOR)
    return ids


def start_position(ledger: Ledger, job_id: str) -> int:
    """The notification id of the job's JobStarted."""
    (started,) = [
        notification
        for notification in store_of(ledger).recorder.select_notifications(1, 10_000)
        if notification.originator_id == Job.id_for(job_id) and notification.originator_version == 1
    ]
    return started.id


def test_views_hold_jobs_gaps_replays_and_halts(ledger: Ledger) -> None:
    ids = record_some(ledger)
    router = ledger.jobs.reflective_log(ids[0]).snapshot_ids["router_snapshot_id"]
    assert router is not None
    ledger.governance.halt_snapshot(router, "key leaked", AUDITOR, DEFAULT_TENANT)
    views = ledger.read_models

    jobs = sorted(views.rows(JOB_INDEX), key=lambda row: row["position"])
    assert [(r["job_id"], r["status"]) for r in jobs] == [
        (ids[0], "sealed"),
        (ids[1], "sealed"),
        (ids[2], "sealed"),
    ]
    # Each job's position is its start's notification id: the order the store recorded them.
    assert [r["position"] for r in jobs] == [start_position(ledger, job_id) for job_id in ids]
    assert [r["replayable"] for r in jobs] == [True, True, False]
    (gap,) = views.rows(NON_REPLAYABLE)
    assert gap["job_id"] == ids[2]
    assert [m["missing"] for m in gap["missing_artifacts"]] == [["prompt", "response"]]
    outcomes = sorted(views.rows(REPLAY_OUTCOMES), key=lambda row: row["job_id"] == ids[2])
    assert [(o["job_id"], o["outcome"], o["error_code"]) for o in outcomes] == [
        (ids[0], "ok", None),
        (ids[2], "failed", "MISSING_PERSISTED_AGENT_OUTPUT"),
    ]
    assert outcomes[0]["actor_id"] == "ana" and outcomes[0]["mode"] == "production"
    (halt,) = views.rows(HALTED_SNAPSHOTS)
    assert (halt["snapshot_id"], halt["tenant"], halt["cause"], halt["reason"]) == (
        router,
        DEFAULT_TENANT,
        "SECURITY_INCIDENT",
        "key leaked",
    )
    ledger.governance.clear_halt(router, Actor.of("cy", ["council"]), DEFAULT_TENANT)
    assert views.rows(HALTED_SNAPSHOTS) == []


def test_tracking_moves_with_the_view_and_catching_up_twice_applies_nothing(
    ledger: Ledger,
) -> None:
    record_some(ledger)
    views = ledger.read_models
    assert views.position() == 0
    applied = views.catch_up()
    assert applied > 0
    position = views.position()
    assert 0 < position <= (store_of(ledger).recorder.max_notification_id() or 0)
    assert views.catch_up() == 0
    assert views.position() == position
    ledger.jobs.run("hello", "s2")
    assert views.catch_up() > 0
    assert views.position() > position


def test_a_rebuild_from_zero_gives_the_live_digests(ledger: Ledger) -> None:
    record_some(ledger)
    views = ledger.read_models
    views.catch_up()
    live = views.digests()
    results = views.rebuild()
    assert [r.view for r in results] == list(VIEWS)
    assert all(r.matches for r in results)
    assert {r.view: (r.rows, r.rebuilt_digest) for r in results} == live
    assert views.digests() == live


def test_the_live_views_are_the_same_whether_caught_up_often_or_once(settings: Settings) -> None:
    with Ledger.open(settings) as often:
        for text in ("2 + 3", "my favorite color is blue", "what is my favorite color"):
            often.jobs.run(text, "s1")
            often.read_models.catch_up()
        often.replays.run(often.jobs.run("hello", "s1").job_id, ReplayMode.AUDIT, AUDITOR)
        often.read_models.catch_up()
        digests = often.read_models.digests()
        often.read_models.view.reset(store_of(often).name)
        often.read_models.catch_up()
        assert often.read_models.digests() == digests


def test_an_edited_view_is_caught_by_rebuild_and_repaired(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(cli_env) as ledger:
        record_some(ledger)
        ledger.read_models.catch_up()
    raw = RawTable(cli_env)
    raw.execute(
        f"UPDATE {TABLE} SET row_json = %s WHERE view = %s",
        ('{"job_id":"forged"}', NON_REPLAYABLE),
    )
    code, out, _ = run(capsys, "rebuild")
    assert code == 1
    assert "non_replayable: 1 rows" in out and "DIFFERS from the live view (now rebuilt)" in out
    assert "job_index: 3 rows" in out and out.count(" matches") == 6  # every other view
    code, out, _ = run(capsys, "rebuild", "--json")
    assert code == 0
    assert '"ok":true' in out


def test_jobs_lists_from_the_index_and_filters_the_non_replayable(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(cli_env) as ledger:
        ids = record_some(ledger)
    code, out, _ = run(capsys, "jobs")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:] if not line.startswith(" ")] == ids
    code, out, _ = run(capsys, "jobs", "--non-replayable")
    assert code == 0
    assert out.splitlines()[1].split()[:3] == [ids[2], "sealed", "no"]


def test_the_views_and_their_tracking_live_in_the_store_itself(settings: Settings) -> None:
    with Ledger.open(settings) as ledger:
        record_some(ledger)
        ledger.read_models.catch_up()
    if isinstance(settings.parsed_store(), SQLiteStore):
        query, expected = "SELECT name FROM sqlite_master", {TABLE, "tracking", "stored_events"}
    else:
        query = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        expected = {TABLE, "ledger_tracking", "ledger_events"}
    assert expected <= {row[0] for row in RawTable(settings).execute(query)}


def test_following_applies_events_as_they_are_committed(settings: Settings) -> None:
    """The follower polls, on both stores (PostgreSQL saves send no NOTIFY)."""
    with Ledger.open(settings) as ledger:
        stop = Event()
        errors: list[BaseException] = []
        reached: list[int] = []
        following = Event()

        def heads(head: int) -> None:
            reached.append(head)
            following.set()

        def follow() -> None:
            try:
                ledger.read_models.follow(stop, heads)
            except BaseException as exc:  # surfaced to the test below
                errors.append(exc)

        follower = Thread(target=follow)
        follower.start()
        try:
            assert following.wait(timeout=30), errors  # caught up once: the job comes after
            job_id = ledger.jobs.run("2 + 3", "s1").job_id
            # The last event the views take (its registration): snapshots and SEM come after it.
            last = store_of(ledger).recorder.select_notifications(1, 1000, topics=TOPICS)[-1].id
            view = ledger.read_models.view
            assert isinstance(view, TrackingRecorder)
            view.wait(store_of(ledger).name, last, timeout=30)
        finally:
            stop.set()
            follower.join()
        assert errors == []
        assert reached[0] < last <= reached[-1]  # where it started, then the heads it reached
        (row,) = [r for _, r in ledger.read_models.view.rows(JOB_INDEX)]
        assert (row["job_id"], row["status"]) == (job_id, "sealed")
        assert row["position"] == start_position(ledger, job_id)


def test_views_an_older_projection_made_are_made_again_from_position_0(
    ledger: Ledger, settings: Settings
) -> None:
    ids = record_some(ledger)
    ledger.read_models.catch_up()
    # As a store kept them from before job positions and the receipt index: no stamp, job rows
    # without positions, no receipt index, and the tracking record at the head.
    raw = RawTable(settings)
    raw.execute(f"DELETE FROM {TABLE} WHERE view IN (%s, %s)", (PROJECTION[0], RECEIPT_INDEX))
    raw.execute(f"UPDATE {TABLE} SET row_json = %s WHERE view = %s", ('{"job_id":"x"}', JOB_INDEX))
    # The process a new release starts (one checks the stamp once, then keeps to its views).
    with Ledger.open(settings) as upgraded:
        jobs = sorted(upgraded.read_models.rows(JOB_INDEX), key=lambda row: row["position"])
        assert [row["job_id"] for row in jobs] == ids
        assert upgraded.read_models.view.row(*PROJECTION) == {"version": PROJECTION_VERSION}
