"""A run sent in batches is stored once (issue 29, point 1), on SQLite and PostgreSQL.

A run opens its job with it; each batch appends its events to the job's stream as the job's
events, in the transaction that indexes their ids on the run; completion writes the job's
completion, its seal and the seal's witness, and marks the run complete: nothing of what the run
sent is written, encoded or validated again. Before, the run held every event in its draft and
completion recorded them all again as the job: every event stored twice.

Counts, never timings. An open run is an open job: listed as one, verified, refused by replay as
any open job is. A run opened before runs opened their jobs (its draft holds its events) still
completes, recorded whole then, into the same job.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from support.encoding_counts import encodings
from support.ledger_fixtures import run, store_of
from support.older_records import Bodies, store_as_written_then
from support.recorder_calls import recorder_calls
from support.validation_counts import validations

from domain.determinism import DeterministicClock
from domain.errors import ConflictError, StoreBusyError
from domain.events import PolicySnapshotRef, RunEvent, RunStarted, StageTransition
from domain.job import DEFAULT_TENANT
from domain.run_draft import RunDraft
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

RUN_EVENTS = 60
BATCH = 20


def stage(n: int) -> tuple[str, RunEvent]:
    """An event whose content no other event of the store holds: ``stored-once-<n>``."""
    return f"e{n}", StageTransition(to_stage=f"stored-once-{n}")


def stored_states(ledger: Ledger) -> list[bytes]:
    """Every record the store holds, as stored, in log order."""
    notifications = store_of(ledger).recorder.select_notifications(start=1, limit=1_000_000)
    return [notification.state for notification in notifications]


def inserted_rows(ledger: Ledger) -> Any:
    """How many rows each insert of the block writes, in order."""
    return recorder_calls(ledger, ("insert_events_with",), lambda _, args, __: len(args[0]))


def test_each_event_of_a_run_sent_in_batches_is_stored_once(ledger: Ledger) -> None:
    started = RunStarted(seed="once", input="count the rows", job_id="run-once")
    ledger.run_uploads.open(started, DEFAULT_TENANT)
    with inserted_rows(ledger) as batches:
        for first in range(0, RUN_EVENTS, BATCH):
            sent = [stage(n) for n in range(first, first + BATCH)]
            ledger.run_uploads.append("run-once", DEFAULT_TENANT, sent)
    # Each batch: its events, one row each in the job's stream, and one row indexing them.
    assert batches == [BATCH + 1] * (RUN_EVENTS // BATCH)
    with inserted_rows(ledger) as completion:
        log, sent_count = ledger.run_uploads.complete("run-once", DEFAULT_TENANT, "done")
    # The completion, the seal, the seal's witness and the run marked complete: whatever the run
    # holds, nothing of it is written again.
    assert completion == [4]
    assert (log.job_id, sent_count, log.sealed) == ("run-once", RUN_EVENTS, True)

    states = stored_states(ledger)
    copies = [
        sum(f'"stored-once-{n}"'.encode() in state for state in states) for n in range(RUN_EVENTS)
    ]
    assert copies == [1] * RUN_EVENTS  # rows per event: 1
    stream = ledger.jobs.stream("run-once")
    assert [entry["event_type"] for entry in stream] == [
        "JobStarted",
        *["StageTransition"] * RUN_EVENTS,
        "JobCompleted",
        "JobSealed",
    ]


def test_completing_a_run_encodes_none_of_its_events_again(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completion reads the job once, verified, and writes its closing events only: none of
    the run's events is encoded again, whether the run holds 10 events or 110.

    Only the encodings of a value holding an event's content (``stored-once-``) are counted:
    the closing events' own encodings are the same for both runs, but the first completion of
    the process also encodes the topics and stream headers that signing memoises process-wide
    (`signed_record`), so a count of every encoding depended on which tests the worker ran
    before (10 or 13)."""
    made: dict[int, int] = {}
    for held in (10, 110):
        run_id = f"r-{held}"
        ledger.run_uploads.open(RunStarted(seed=7, input="hi", job_id=run_id), DEFAULT_TENANT)
        ledger.run_uploads.append(run_id, DEFAULT_TENANT, [stage(n) for n in range(held)])
        with encodings(monkeypatch, holding="stored-once-") as count:
            ledger.run_uploads.complete(run_id, DEFAULT_TENANT, "done")
        made[held] = count[0]
    assert made == {10: 0, 110: 0}


def old_draft(ledger: Ledger, run_id: str, started: dict[str, Any], events: list[Any]) -> None:
    """A run as a ledger that held a run's events in its draft stored it: opened (version 1 of
    `RunDraft.Opened`, no job), one batch of ``events`` (version 1 of its batches)."""
    bodies: Bodies = [
        (
            RunDraft.Opened,
            {
                "run_id": run_id,
                "tenant": DEFAULT_TENANT,
                "started": started,
                "originator_topic": "domain.run_draft:RunDraft",
            },
        ),
        (
            RunDraft.BatchAppended,
            {"events": [{"event_id": f"e{n}", "event": e} for n, e in enumerate(events)]},
        ),
    ]
    stream = RunDraft.id_in(DEFAULT_TENANT, run_id)
    store_as_written_then(ledger, stream, DeterministicClock(f"run-draft:{run_id}"), bodies)


def comparable(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A job's stream entries without what names the job (its id, its records' MACs)."""
    kept = []
    for entry in entries:
        payload = {k: v for k, v in entry["payload"].items() if k not in {"job_id", "mac_digest"}}
        kept.append({**{k: v for k, v in entry.items() if k != "uri"}, "payload": payload})
    return kept


def test_a_run_opened_before_its_job_was_opened_with_it_still_completes(ledger: Ledger) -> None:
    """Stored bytes of existing streams never change: its draft still takes batches, which it
    holds, and completes into the job the same run opened now becomes."""
    ids = ledger.snapshots.default_ids()
    contents = [orjson.loads(event.model_dump_json()) for _, event in map(stage, range(3))]
    start = {"type": "RunStarted", "seed": "old", "input": "hi", "snapshot_ids": ids}
    old_draft(ledger, "run-old", {**start, "job_id": "run-old"}, contents[:2])
    held = ledger.run_uploads.get("run-old", DEFAULT_TENANT)
    assert (held.job_id, held.count) == (None, 2)
    outcome = ledger.run_uploads.append("run-old", DEFAULT_TENANT, [("e1", stage(1)[1]), stage(2)])
    assert (outcome.accepted, outcome.duplicates, outcome.total) == (1, 1, 3)
    assert ledger.run_uploads.get("run-old", DEFAULT_TENANT).events == contents

    new = RunStarted.model_validate({**start, "job_id": "run-new"})
    ledger.run_uploads.open(new, DEFAULT_TENANT)
    ledger.run_uploads.append("run-new", DEFAULT_TENANT, [stage(n) for n in range(3)])
    for run_id in ("run-old", "run-new"):
        log, sent = ledger.run_uploads.complete(run_id, DEFAULT_TENANT, "done")
        assert (log.job_id, sent, log.sealed) == (run_id, 3, True)
    old_job = comparable(ledger.jobs.stream("run-old"))
    assert old_job == comparable(ledger.jobs.stream("run-new"))
    assert len(old_job) == 6  # started, 3 events, completed, sealed


def test_an_open_run_is_an_open_job_to_listing_verify_and_replay(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a store as CLI writes leave it (checkpointed)."""
    monkeypatch.setenv("MACE_ACTOR", "ada")
    monkeypatch.setenv("MACE_ROLES", "auditor")
    assert run(capsys, "run", "2 + 2", "--seed", "s0")[0] == 0
    with Ledger.open(cli_env, create=False) as ledger:
        ids = ledger.snapshots.default_ids()
        started = RunStarted(seed=7, input="work", job_id="run-open", snapshot_ids=ids)
        ledger.run_uploads.open(started, DEFAULT_TENANT)
        ledger.run_uploads.append("run-open", DEFAULT_TENANT, [stage(1)])

    code, out, err = run(capsys, "jobs", "--status", "open", "--json")
    assert code == 0, err
    assert [job["job_id"] for job in orjson.loads(out)["jobs"]] == ["run-open"]
    code, out, err = run(capsys, "replay", "run-open")
    assert (code, out) == (2, "")
    assert err == (
        "mace: INVALID_INPUT: job run-open is open: only completed, sealed jobs can be replayed\n"
    )
    code, out, err = run(capsys, "verify", "--all")
    assert code == 0, out + err

    with Ledger.open(cli_env, create=False) as ledger:
        ledger.run_uploads.complete("run-open", DEFAULT_TENANT, "done")
    code, out, err = run(capsys, "replay", "run-open")  # sealed: replayed (a fact it cannot redo)
    assert (code, err) == (
        1,
        "mace: NOT REPRODUCED: none of the run's events could be re-executed\n",
    )
    assert "replay of job run-open (attempt 1, audit, by ada [auditor])" in out
    assert orjson.loads(run(capsys, "jobs", "--status", "open", "--json")[1])["jobs"] == []


def test_a_runs_job_written_by_another_writer_refuses_the_runs_batch_and_completion(
    ledger: Ledger,
) -> None:
    """A batch appends where the run's index says its job stands: a fact another writer put on
    the job (`JobService.record_events`) makes that write conflict, and the run, which no longer
    says what its job holds, is refused; nothing of it is written."""
    ledger.run_uploads.open(RunStarted(seed=7, input="hi", job_id="run-x"), DEFAULT_TENANT)
    ledger.run_uploads.append("run-x", DEFAULT_TENANT, [stage(1)])
    ledger.jobs.record_events("run-x", [("StageTransition", {"to_stage": "other"})])
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(StoreBusyError, match="events for run run-x"):
        ledger.run_uploads.append("run-x", DEFAULT_TENANT, [stage(2)])
    with pytest.raises(ConflictError, match="job run-x holds 2 events, run run-x took 1"):
        ledger.run_uploads.complete("run-x", DEFAULT_TENANT, "done")
    assert store_of(ledger).recorder.max_notification_id() == before


def test_completing_a_run_decodes_each_of_its_facts_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completion reads the job back (verified: each record decoded once, its facts but the last
    taken from their records without validating them again as events) and decodes each fact
    once, for the policy bundles it names, the verdict's folds and the log alike (before, a fact
    naming a bundle was decoded three times, an iteration trace twice)."""
    ledger.run_uploads.open(RunStarted(seed=7, input="hi", job_id="run-d"), DEFAULT_TENANT)
    sent: list[tuple[str, RunEvent]] = [
        (f"p{n}", PolicySnapshotRef(policy_bundle_hash=f"{n:064x}")) for n in range(3)
    ]
    ledger.run_uploads.append("run-d", DEFAULT_TENANT, sent)
    with validations(monkeypatch) as counted:
        ledger.run_uploads.complete("run-d", DEFAULT_TENANT, "done")
    assert (counted["Job.Recorded"], counted["PolicySnapshotRef"]) == (1, 3)
