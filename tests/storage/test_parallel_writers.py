"""PostgreSQL saves commit side by side, and every reader of the log's order still skips nothing.

Without the table lock, a save's notification ids are drawn at insert and become visible at
commit, so a later id may be committed while an earlier one is still in flight. A reader that
went past the earlier one then (a checkpoint, the read models, ``mace follow``) would never see
it: the read models would miss a job for ever, and the next checkpoint would count an event
"inserted below" the one before (`postgres_recorder.settled_head` is the fix). And a save that
checked a stream it read had not moved (a Stage-0 job's SEM reads) could pass its check while a
save writing that stream was in flight, and commit after it: the job would claim a SEM value the
log had already replaced (write skew; the saves' stream locks are the fix).

Each race is set up with a real save paused inside its transaction (an ``also`` write that waits
for the test's go) and a second connection; the reader or the other save runs in a thread, and
the test waits, in a bounded poll, until that one is done or waits for a lock.
SQLite lets one transaction write at a time, so none of these races can be set up there; the
readers are the same code on both stores and are run on SQLite by the rest of the suite.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import pytest
from support.ledger_fixtures import settings_for, store_of, subprocess_env
from support.sample_job import job_ids, record_sample_job

from domain.job import Job
from domain.sem import SemEntry
from infrastructure.application.ledger import Ledger
from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.backends.postgres_recorder import (
    STREAM_LOCKS,
    LedgerPostgresRecorder,
    stream_locks,
)
from infrastructure.storage.settings import PostgresStore, Settings
from infrastructure.storage.store import LedgerStore

DEADLINE_SECONDS = 60.0
"""Far beyond what a thread needs to reach its lock; only there so that a hang fails."""
POLL_SECONDS = 0.005


@pytest.fixture
def pg_settings(make_postgres_store: Callable[[], str]) -> Settings:
    return settings_for(make_postgres_store())


@pytest.fixture
def pg_ledger(pg_settings: Settings) -> Iterator[Ledger]:
    with Ledger.open(pg_settings, checkpoint_on_close=False) as opened:
        yield opened


class Paused:
    """A save held open after its inserts (its ids drawn, its locks held), until `go`."""

    def __init__(self, save: Callable[[Callable[[Any], None]], object]) -> None:
        self.inserted = threading.Event()
        self._go = threading.Event()
        self.error: BaseException | None = None

        def hold(_cursor: Any) -> None:
            self.inserted.set()
            assert self._go.wait(DEADLINE_SECONDS)

        def run() -> None:
            try:
                save(hold)
            except BaseException as exc:  # reported by `commit`
                self.error = exc

        self._thread = threading.Thread(target=run)

    def __enter__(self) -> Paused:
        self._thread.start()
        assert self.inserted.wait(DEADLINE_SECONDS), "the paused save never inserted"
        return self

    def commit(self) -> None:
        self._go.set()
        self._thread.join(DEADLINE_SECONDS)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error

    def __exit__(self, *_: object) -> None:
        self._go.set()
        self._thread.join(DEADLINE_SECONDS)


class Beside:
    """Work run in a thread beside a paused save: its answer or error once it ends."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.done = threading.Event()
        self.answer: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.answer = work()
            except BaseException as exc:  # re-raised or inspected by the test
                self.error = exc
            finally:
                self.done.set()

        self._thread = threading.Thread(target=run)
        self._thread.start()

    def result(self) -> Any:
        assert self.done.wait(DEADLINE_SECONDS)
        if self.error is not None:
            raise self.error
        return self.answer


def patient(store: LedgerStore) -> LedgerPostgresRecorder:
    """The store's recorder, its readers' barrier waiting for the saves in flight however slow
    the machine is (a barrier that gave up would answer an older head, correctly)."""
    recorder = store.recorder
    assert isinstance(recorder, LedgerPostgresRecorder)
    recorder.barrier_timeout = DEADLINE_SECONDS
    return recorder


def waiting_on_a_lock(store: PostgresStore) -> bool:
    with connect_postgres(store) as conn:
        rows = conn.execute("SELECT 1 FROM pg_locks WHERE NOT granted LIMIT 1").fetchall()
    return bool(rows)


def ended_or_waiting(beside: Beside, store: PostgresStore) -> bool:
    """Once ``beside`` has ended or waits for a lock (bounded poll): False if it ended."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not beside.done.wait(POLL_SECONDS):
        if waiting_on_a_lock(store):
            return True
        assert time.monotonic() < deadline, "neither ended nor waiting for a lock"
    return False


@contextmanager
def job_in_flight(store: LedgerStore, job_id: str, snapshots: dict[str, str]) -> Iterator[Paused]:
    """A job's first save, its ids drawn and not committed, until the block commits it."""
    job = Job.start(job_id, "s1", "2 + 2", snapshots)
    with Paused(lambda hold: store.save(job, also=hold)) as paused:
        yield paused


def notification_ids(store: LedgerStore) -> list[int]:
    """Every notification id in the events table, committed now, in order (read raw)."""
    location = store.location
    assert isinstance(location, PostgresStore)
    with connect_postgres(location) as conn:
        rows = conn.execute("SELECT notification_id FROM ledger_events ORDER BY 1").fetchall()
    return [row[0] for row in rows if isinstance(row[0], int)]


def _catch_up(ledger: Ledger) -> None:
    ledger.read_models.catch_up()


def _checkpoint(ledger: Ledger) -> None:
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()


@pytest.mark.parametrize("reader", [_catch_up, _checkpoint], ids=["read models", "checkpoint"])
def test_a_reader_never_passes_an_id_still_in_flight(
    pg_ledger: Ledger, pg_settings: Settings, reader: Callable[[Ledger], None]
) -> None:
    """The lower id in flight, a higher one committed: the reader waits for the lower one to
    end (the barrier), then takes both; it never goes past the lower one and skips it."""
    store = store_of(pg_ledger)
    location = pg_settings.parsed_store()
    assert isinstance(location, PostgresStore)
    record_sample_job(pg_ledger, "before")
    reader(pg_ledger)
    snapshots = dict(pg_ledger.jobs.get("before").snapshot_ids)
    with job_in_flight(store, "in-flight", snapshots) as in_flight:
        record_sample_job(pg_ledger, "committed-after")  # higher ids, committed first
        beside = Beside(lambda: reader(pg_ledger))
        ended_or_waiting(beside, location)  # a reader that went past the id in flight has ended
        in_flight.commit()
    beside.result()
    reader(pg_ledger)
    # Everything the log holds now was taken by the reader, the id in flight included.
    assert sorted(job_ids(pg_ledger)) == ["before", "committed-after", "in-flight"]
    verified = store.verify_all()
    assert verified.tree is not None
    assert verified.jobs == 3


def test_a_reader_moves_on_past_a_save_rolled_back(
    pg_ledger: Ledger, pg_settings: Settings
) -> None:
    """A save in flight that is rolled back (its writer gone) leaves a gap for good: the reader
    waits for it to end, then goes past it, and nothing of it is ever read."""
    store = store_of(pg_ledger)
    location = pg_settings.parsed_store()
    assert isinstance(location, PostgresStore)
    recorder = patient(store)
    record_sample_job(pg_ledger, "before")
    snapshots = dict(pg_ledger.jobs.get("before").snapshot_ids)

    def fail(hold: Callable[[Any], None]) -> None:
        def then_fail(cursor: Any) -> None:
            hold(cursor)
            raise RuntimeError("the writer died")

        store.save(Job.start("rolled-back", "s1", "2 + 2", snapshots), also=then_fail)

    with Paused(fail) as doomed:
        record_sample_job(pg_ledger, "after")
        beside = Beside(recorder.max_notification_id)
        assert ended_or_waiting(beside, location), "the head was read past a save in flight"
        with pytest.raises(RuntimeError, match="the writer died"):
            doomed.commit()
    assert beside.result() == max(notification_ids(store))
    pg_ledger.read_models.catch_up()
    assert sorted(job_ids(pg_ledger)) == ["after", "before"]


def test_a_reader_behind_a_save_stuck_in_flight_answers_the_last_settled_head(
    pg_ledger: Ledger,
) -> None:
    """A save that stays in flight (its client cut off from the server) holds no reader: the
    barrier gives up after its timeout and the reader answers the last head it settled, never
    one past the save in flight; writers beside it still commit."""
    store = store_of(pg_ledger)
    recorder = store.recorder
    assert isinstance(recorder, LedgerPostgresRecorder)
    record_sample_job(pg_ledger, "before")
    head = recorder.max_notification_id()
    recorder.barrier_timeout = 0.2
    snapshots = dict(pg_ledger.jobs.get("before").snapshot_ids)
    with job_in_flight(store, "stuck", snapshots) as stuck:
        record_sample_job(pg_ledger, "beside")
        assert recorder.max_notification_id() == head
        stuck.commit()
    assert (recorder.max_notification_id() or 0) == max(notification_ids(store))
    pg_ledger.read_models.catch_up()
    assert sorted(job_ids(pg_ledger)) == ["before", "beside", "stuck"]


SEM_KEY = "world/country/france/capital"


def test_a_save_whose_read_stream_a_save_in_flight_writes_conflicts_and_retries(
    pg_ledger: Ledger, pg_settings: Settings
) -> None:
    """Write skew: a save that read a SEM key (not there yet) and a save in flight creating
    it. The reading save waits for the writing one, then finds the key moved and loses the race
    (`racing`): it decides again on the key as written, and its job follows the key's write in
    the log. Without the stream locks its check passed (the write was not committed yet), it
    committed after the write, and the log held a job that claims the key unwritten after it."""
    store = store_of(pg_ledger)
    location = pg_settings.parsed_store()
    assert isinstance(location, PostgresStore)
    record_sample_job(pg_ledger, "before")  # the key checks are written: no save carries one
    entry = SemEntry.first_write("default", SEM_KEY, "Paris", "test")
    key = entry.id
    jobs: dict[int, UUID] = {}

    def attempt() -> None:
        version = store.stream_version(key)
        job = Job.start(f"reads-at-{version}", "s1", "2 + 2", {})
        jobs[version] = job.id
        store.save_unmoved(job, read={key: version})

    with Paused(lambda hold: store.save(entry, also=hold)) as writing:
        beside = Beside(lambda: store.racing(attempt, "a job that read the SEM key"))
        ended_or_waiting(beside, location)  # a save that did not wait has committed
        writing.commit()
    beside.result()
    assert list(jobs) == [0, 1]
    positions = store.stream_positions([key, jobs[1]])
    assert max(positions[key].values()) < min(positions[jobs[1]].values())
    assert not store.stream_exists(jobs[0])


def test_two_saves_of_the_same_stream_version_conflict_and_the_loser_retries(
    pg_ledger: Ledger, pg_settings: Settings
) -> None:
    """The same stream's next version from two saves: the second waits for the first, loses on
    the unique key, and `racing` makes it again on top of the winner's."""
    store = store_of(pg_ledger)
    location = pg_settings.parsed_store()
    assert isinstance(location, PostgresStore)
    record_sample_job(pg_ledger, "before")  # the key checks are written: no save carries one
    first = SemEntry.first_write("default", SEM_KEY, "Paris", "first")
    tries: list[int] = []

    def attempt() -> None:
        tries.append(store.stream_version(first.id))
        if not tries[-1]:  # none yet: create it, as the SEM use case does
            store.save(SemEntry.first_write("default", SEM_KEY, "Lyon", "second"))
            return
        entry: SemEntry = store.repository.get(first.id)
        entry.write("Lyon", "second")
        store.save(entry)

    with Paused(lambda hold: store.save(first, also=hold)) as writing:
        beside = Beside(lambda: store.racing(attempt, "the SEM key"))
        assert ended_or_waiting(beside, location), "the second save did not wait"
        writing.commit()
    beside.result()
    assert tries == [0, 1]
    assert store.stream_version(first.id) == 2


def test_a_save_of_more_streams_than_it_locks_runs_alone_and_is_read_whole(
    pg_ledger: Ledger, pg_settings: Settings
) -> None:
    """A save of more than `STREAM_LOCKS` streams (a bundle's import) takes the writers' lock
    exclusively instead: a reader's barrier waits for it like any other save, and reads it
    whole."""
    store = store_of(pg_ledger)
    location = pg_settings.parsed_store()
    assert isinstance(location, PostgresStore)
    recorder = patient(store)
    record_sample_job(pg_ledger, "before")
    entries = [
        SemEntry.first_write("default", f"world/city/c{n}/name", n, "test")
        for n in range(STREAM_LOCKS + 1)
    ]
    with Paused(lambda hold: store.save(*entries, also=hold)) as alone:
        beside = Beside(recorder.max_notification_id)
        assert ended_or_waiting(beside, location), "the head was read past a save in flight"
        alone.commit()
    assert beside.result() == max(notification_ids(store))
    assert all(store.stream_version(entry.id) == 1 for entry in entries)


def test_stream_lock_keys_are_sorted_and_a_written_stream_is_locked_exclusively() -> None:
    a, b, c = UUID(int=3 << 96), UUID(int=1 << 96), UUID(int=2 << 96)
    high, low, shared = stream_locks([a, b], [c, a])
    assert high == [1, 2, 3]
    assert low == [0, 0, 0]
    assert shared == [False, True, False]


WRITER = """
import sys
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

writer, jobs = sys.argv[1], int(sys.argv[2])
with Ledger.open(Settings(), checkpoint_on_close=False) as ledger:
    for n in range(jobs):
        print(ledger.jobs.run(f"what is {writer} + {n}?", "s1").job_id, flush=True)
"""
PAGE = 100
PACE_SECONDS = 0.05
"""How often the follower and the notary go round while the writers write (their pace, as the
notary's interval and ``mace follow``'s poll; nothing waits on it)."""


class GoingRound:
    """``work`` done in a thread with a ledger of its own, every `PACE_SECONDS` until `finish`,
    then once more: a last round that starts after everything before `finish` ended."""

    def __init__(self, settings: Settings, work: Callable[[Ledger], None]) -> None:
        self._stop = threading.Event()
        self._settings = settings
        self._work = work
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        with Ledger.open(self._settings, create=False, checkpoint_on_close=False) as ledger:
            while True:
                last = self._stop.is_set()
                self._work(ledger)
                if last:
                    return
                self._stop.wait(PACE_SECONDS)

    def finish(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_SECONDS)
        assert not self._thread.is_alive()


def following(read: list[int]) -> Callable[[Ledger], None]:
    """A follower's round: page through the log up to its head as `ReadModels.catch_up` does,
    from the last id read, keeping each id in ``read``, and bring the read models up to date."""

    def follow(ledger: Ledger) -> None:
        recorder = store_of(ledger).recorder
        head = recorder.max_notification_id() or 0
        after = read[-1] if read else 0
        while page := recorder.select_notifications(after + 1, PAGE, stop=head):
            read.extend(notification.id for notification in page)
            after = page[-1].id
        ledger.read_models.catch_up()

    return follow


def checkpointing(ledger: Ledger) -> None:
    """A notary's round: checkpoint what was committed."""
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()


def writer_killed_after(
    store_url: str, writer: int, jobs: int, kill_after: int | None, acknowledged: list[str]
) -> threading.Thread:
    """A writer process recording ``jobs`` Stage-0 jobs, each acknowledged (its id printed)
    once its save returned; killed with SIGKILL right after its ``kill_after``-th
    acknowledgement (None: never), somewhere in the next job's work or commit."""
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(writer), str(jobs)],
        env=subprocess_env(store_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )

    def watch() -> None:
        assert process.stdout is not None
        for count, line in enumerate(process.stdout, start=1):
            acknowledged.append(line.strip())
            if count == kill_after:
                process.kill()
                break
        process.wait(DEADLINE_SECONDS)
        process.stdout.close()

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def killed_writers_round(
    settings: Settings, rng: random.Random, writers: int, jobs: int
) -> tuple[int, int]:
    """Writer processes (about half killed at a random acknowledgement) beside a follower and a
    notary; then nothing acknowledged is lost, the follower read the log's order exactly, the
    read models list every job, and the ledger verifies. Returns (jobs acknowledged, kills)."""
    store_url = settings.store
    acknowledged: list[str] = []
    kills = {w: rng.randint(1, jobs - 1) for w in range(writers) if rng.random() < 0.5}
    followed: list[int] = []
    follower, notary = (
        GoingRound(settings, following(followed)),
        GoingRound(settings, checkpointing),
    )
    try:
        watching = [
            writer_killed_after(store_url, w, jobs, kills.get(w), acknowledged)
            for w in range(writers)
        ]
        for thread in watching:
            thread.join(DEADLINE_SECONDS)
            assert not thread.is_alive()
    finally:
        notary.finish()
        follower.finish()
    with Ledger.open(settings, create=False, checkpoint_on_close=False) as ledger:
        store = store_of(ledger)
        log = notification_ids(store)
        assert followed == log  # nothing skipped, nothing read twice, in the log's order
        listed = set(job_ids(ledger))
        assert set(acknowledged) <= listed  # nothing acknowledged lost
        for job_id in acknowledged:
            assert ledger.jobs.get(job_id).job_id == job_id
        checkpoints = store.checkpoints
        assert checkpoints is not None
        checkpoints.write()
        verified = store.verify_all()
        assert verified.tree is not None
        assert verified.jobs == len(listed)
    return len(acknowledged), len(kills)


def test_writers_killed_at_random_points_lose_nothing_and_readers_skip_nothing(
    pg_ledger: Ledger, pg_settings: Settings
) -> None:
    """Concurrent writer processes, some killed with SIGKILL at random points of their work
    (a save in flight then is rolled back: its ids are a gap for good), beside a follower
    reading the log as it grows and a notary checkpointing it. More rounds, bigger:
    ``killed_writers_round`` by hand (docs/ordering.md)."""
    record_sample_job(pg_ledger, "before")  # the key checks are written, and checkpointed
    checkpoints = store_of(pg_ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()
    acknowledged, kills = killed_writers_round(pg_settings, random.Random(1), writers=3, jobs=4)
    assert acknowledged > 0
    assert kills == 2
