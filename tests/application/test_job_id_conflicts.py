"""A named job id that is taken is refused by the store's unique key, not by a read of the job's
stream before the write (issue 29 point 1), on SQLite and PostgreSQL: the same CONFLICT (409,
exit 2) and message as before, nothing written, on a fresh store and on a checkpointed one; and
an id whose stream was deleted below a checkpoint still fails closed (INTEGRITY_FAILURE, exit 1),
by the proof of the stream's checkpointed head the write makes before it inserts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent
from support.cli_output import assert_failure_line, assert_usage_error, event_count
from support.ledger_fixtures import RawTable, run, store_of

from domain.errors import ConflictError
from domain.job import Job
from infrastructure.application.errors import failure_of
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings


def streams_read(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[UUID]:
    """The streams the ledger reads one by one from now on, in order."""
    recorder = store_of(ledger).recorder
    select = recorder.select_events
    read: list[UUID] = []

    def counted(originator_id: UUID, **kwargs: Any) -> Sequence[StoredEvent]:
        read.append(originator_id)
        return select(originator_id, **kwargs)

    monkeypatch.setattr(recorder, "select_events", counted)
    return read


def test_a_new_named_job_is_written_without_reading_its_stream_first(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.jobs.run("2 + 3", "s1", job_id="first")  # the default snapshots stored
    read = streams_read(ledger, monkeypatch)
    ledger.jobs.run("2 + 3", "s1", job_id="second")
    assert Job.id_for("second") not in read
    assert ledger.jobs.reflective_log("second").sealed


def test_a_taken_named_id_is_the_same_conflict_and_writes_nothing(ledger: Ledger) -> None:
    ledger.jobs.run("2 + 3", "s1", job_id="job-a")
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(ConflictError) as caught:
        ledger.jobs.run("my favorite color is red", "s2", job_id="job-a")
    answer = failure_of(caught.value)
    assert answer is not None
    assert (answer.code, answer.message, answer.status, answer.exit_code) == (
        "CONFLICT",
        "job job-a already exists",
        409,
        2,
    )
    assert store_of(ledger).recorder.max_notification_id() == before
    assert ledger.jobs.reflective_log("job-a").job_input == "2 + 3"
    assert not ledger.sem.get("user/person/default/favorite_color")[1].exists


def test_on_a_checkpointed_store_a_taken_id_conflicts_and_a_deleted_one_fails_closed(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("run", "2 + 3", "--seed", "s1", "--job-id", "job-a")
    code, _, err = run(capsys, *argv)  # every CLI write ends with a checkpoint
    assert code == 0, err
    table = RawTable(cli_env)
    before = event_count(cli_env)

    code, out, err = run(capsys, *argv)
    assert_usage_error(code, out, err, "job job-a already exists")
    assert err == "mace: CONFLICT: job job-a already exists\n"
    assert event_count(cli_env) == before

    # Deleted whole below the checkpoint, as someone with database access could: the id is not
    # free, the write is refused as the tampering it is, and nothing is written over it.
    stream = Job.id_for("job-a")
    table.execute("DELETE FROM {table} WHERE originator_id = %s", (table.key(stream),))
    deleted = event_count(cli_env)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert f"stream {stream} version 1: truncated below checkpoint " in err, err
    assert event_count(cli_env) == deleted
