"""The read models kept up to date from the ledger's notification log, and rebuilt from zero.

`ReadModelProjection` is an eventsourcing `Projection` over a tracking recorder
(`read_model_views`); `ReadModels.catch_up` feeds it the events the view has not seen, in pages
of notifications filtered by topic, each page's rows and tracking record committed together. This
pull loop serves both backends: SQLite cannot subscribe, and a command-line read on PostgreSQL
wants the view current *now*, not when a subscriber gets to it. Every notification is verified
(its MAC) before it is decoded.

`follow` keeps the views current as events are committed: it catches up every `FOLLOW_POLL`
seconds, on both stores. (PostgreSQL saves send no NOTIFY: a transaction that notifies takes a
lock at commit that lets one such commit through at a time, and saves commit side by side.)

`rebuild` first brings the live views up to date and takes their digests (the recorded ones),
then empties them and projects the whole log again from position 0, and compares.

`compare` is the rebuild a read store (``MACE_READ_STORE``) gets: it writes nothing. It takes the
digests of the views the read store holds, as they stand at their own position, projects the
read store's log from 0 to that position into memory, and compares. It does not write the
rebuilt views to the primary: they would be the replica's log projected up to the replica's head,
put in place of the primary's views caught up to the primary's head, and the comparison would
differ whenever the replica lags, though nothing is wrong. One database, one position: the
verdict is about the read store's views and log; repairing the primary's is ``rebuild`` there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from threading import Event, Lock
from typing import Any, Final
from uuid import UUID

from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.projection import Projection

from domain.errors import IntegrityFailure
from domain.snapshot import Snapshot
from infrastructure.application.interrupts import stop_if_interrupted
from infrastructure.storage.read_models.memory import MemoryReadModelView
from infrastructure.storage.read_models.tables import TABLE, ReadModelView, Row
from infrastructure.storage.store import LedgerStore
from projections.job_search import JobQuery
from projections.job_summaries import LISTING_LIMIT, job_listing, listing_page
from projections.read_model_rows import (
    AUDIT_RECORDS,
    JOB_INDEX,
    NON_REPLAYABLE,
    OPEN_RUNS,
    PROJECTION,
    PROJECTION_VERSION,
    RECEIPT_INDEX,
    TOPICS,
    VIEWS,
    receipt_key,
    view_changes,
    view_digest,
    with_gone_snapshots,
)

PAGE: Final = 1000
FOLLOW_POLL: Final = 1.0
"""Seconds `follow` waits between catch-ups."""
Progress = Callable[[int, int], None]
"""Called with (position reached, head of the log) after each page."""


class ReadModelProjection(Projection[Any]):
    """Applies events to the views; rows read during a page are cached until it is written."""

    name = "mace_read_models"
    topics = TOPICS

    def __init__(self, view: ReadModelView) -> None:
        super().__init__(view)
        self._pending: dict[tuple[str, str], Row | None] = {}

    def _current(self, view: str, key: str) -> Row | None:
        if (view, key) in self._pending:
            return self._pending[(view, key)]
        return self.view.row(view, key)  # type: ignore[no-any-return]

    def add(self, domain_event: object, position: int) -> None:
        """Gather how the event at notification id ``position`` changes the views."""
        for change in view_changes(domain_event, self._current, position):
            self._pending[(change.view, change.key)] = change.row

    def stamp(self) -> None:
        """Mark the views, with the next page, as made by this projection."""
        self._pending[PROJECTION] = {"version": PROJECTION_VERSION}

    def commit(self, tracking: Tracking) -> None:
        try:
            self.view.apply(self._pending, tracking)
        finally:
            self._pending = {}

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        self.add(domain_event, tracking.notification_id)
        self.commit(tracking)


@dataclass(frozen=True)
class JobPage:
    rows: list[Row]
    """The job index rows of the page, in the order the store recorded the jobs."""
    after: int | None
    """The position the next page starts after; None: this is the last page."""


@dataclass(frozen=True)
class RebuiltView:
    view: str
    rows: int
    recorded_digest: str
    rebuilt_digest: str

    @property
    def matches(self) -> bool:
        return self.recorded_digest == self.rebuilt_digest


class ReadModels:
    def __init__(self, store: LedgerStore, view: ReadModelView | None = None) -> None:
        """``view``: where the rows are kept, if not in the store's tables (`compare`)."""
        self.store = store
        self._view = view
        # The projection gathers a page's changes before committing them: one page at a time.
        self._applying = Lock()
        # Whether the views were found made by this projection (`PROJECTION`): once they are,
        # only a reset (`rebuild`) unmakes them, so the stamp is not read on every catch-up.
        self._stamped = False
        # (position, head) of the last catch-up that read to the head and found no event the
        # views take (a checkpoint's ends the log after every CLI write): not read again.
        self._nothing_new: tuple[int, int] | None = None

    @property
    def view(self) -> ReadModelView:
        return self.store.read_model_view if self._view is None else self._view

    @cached_property
    def projection(self) -> ReadModelProjection:
        return ReadModelProjection(self.view)

    def position(self) -> int:
        return self.view.max_tracking_id(self.store.name) or 0

    def catch_up(self, progress: Progress | None = None, *, upto: int | None = None) -> int:
        """Apply every event the views have not seen (up to position ``upto``, if given);
        returns how many were applied."""
        retries = self.store.retries.start("read models: the next page of events to apply")
        while True:
            reached = self.position()
            try:
                with self._applying:
                    return self._catch_up(reached, progress, upto)
            except IntegrityError:
                if self.position() == reached:
                    raise  # no page was applied meanwhile: no race, the store refused the write
                retries.lost()  # another process applied a page first: carry on from there

    def _catch_up(self, reached: int, progress: Progress | None, upto: int | None) -> int:
        """Apply the events after position ``reached`` (the views' position, just read)."""
        recorder = self.store.recorder
        head = recorder.max_notification_id() or 0
        head = head if upto is None else min(head, upto)
        if not self._stamped:
            made_by = self.view.row(*PROJECTION)
            if made_by is None or made_by.get("version") != PROJECTION_VERSION:
                if reached:  # views an older projection made: made again from position 0
                    self.view.reset(self.store.name)
                    reached = 0
                self.projection.stamp()
            else:
                self._stamped = True
        start = head + 1 if (reached, head) == self._nothing_new else reached + 1
        applied = 0
        while start <= head:
            page = recorder.select_notifications(start, PAGE, stop=head, topics=TOPICS)
            if not page:
                self._nothing_new = (start - 1, head)
                break
            for notification in page:
                event = self.store.mapper.to_domain_event(notification)
                self.projection.add(event, notification.id)
            self.projection.commit(Tracking(self.store.name, page[-1].id))
            self._stamped = True  # a stamp pending went with the page
            applied += len(page)
            start = page[-1].id + 1
            if progress is not None:
                progress(page[-1].id, head)
        if progress is not None:
            progress(head, head)
        return applied

    def follow(self, stop: Event, reached: Callable[[int], None]) -> None:
        """Apply events as they are committed, until ``stop`` is set; ``reached(position)``
        once the views have first caught up, then after each catch-up that applied events.

        It catches up every `FOLLOW_POLL` seconds. Polling skips nothing: each catch-up reads
        up to the log's settled head and starts above the last event applied, and no event
        below a settled head commits later (SQLite numbers its events under its one write
        lock; PostgreSQL readers stop at `settled_head`, see docs/ordering.md)."""
        self._caught_up(reached, report_none=True)
        while not stop.wait(FOLLOW_POLL):
            stop_if_interrupted()  # a Ctrl-C lost where Python ignores exceptions
            self._caught_up(reached)

    def _caught_up(self, reached: Callable[[int], None], *, report_none: bool = False) -> None:
        """Catch up to the log's head; say that head if events were applied (or
        ``report_none``). The head, not the views' own position: that is the last event the
        views take, and the log may hold others after it (checkpoints)."""
        head = self.store.recorder.max_notification_id() or 0
        if self.catch_up(upto=head) or report_none:
            reached(head)

    def jobs(
        self,
        query: JobQuery,
        *,
        non_replayable: bool = False,
        limit: int = LISTING_LIMIT,
        offset: int = 0,
    ) -> dict[str, Any]:
        """A page of the jobs ``query`` filters (its tenant's; None: every tenant's), in the
        order they were recorded (`listing_page`: ``{"jobs", "total"}``; the query's own page,
        ``after`` and ``size``, is the dashboard's and not read here); ``non_replayable``: only
        those production replay cannot redo (and open ones, whose verdict is not known yet)."""
        jobs = self._job_views()[0]
        listed = [(key, row) for key, row in jobs if query.tenant in {None, row.get("tenant")}]
        # The view says what each job was when it was projected: a job stream cut short or
        # deleted below the newest checkpoint since then fails the listing, as reading it would.
        self.store.require_stored_heads([UUID(key) for key, _ in listed])
        # Filtered after the gone snapshots are laid over the rows (`_job_views`), as
        # `job_page` does: "replayable" is what the job is now, not when it was projected.
        summaries = job_listing([row for _, row in listed if query.matches(row)])
        if non_replayable:
            summaries = [summary for summary in summaries if summary["replayable"] is not True]
        return listing_page(summaries, limit, offset)

    def open_runs(self, tenant: str | None) -> list[Row]:
        """The tenant's runs (None: every tenant's) recorded from outside and neither completed
        nor abandoned (an emitter that died leaves one), oldest first."""
        self.catch_up()
        # A row keeps its job's index key for the view's own use (`read_model_rows`), not shown.
        rows = [
            {k: v for k, v in row.items() if k != "job"} for _, row in self.view.rows(OPEN_RUNS)
        ]
        listed = [row for row in rows if tenant is None or row["tenant"] == tenant]
        return sorted(listed, key=lambda row: int(row["position"]))

    def job_page(self, query: JobQuery) -> JobPage:
        """One page of the jobs ``query`` asks for, searched in the store's tables page by page
        (never every job at once), each row with the snapshots found gone since laid over it,
        and each listed job's stream held to its checkpointed head as `jobs` holds them."""
        self.catch_up()
        found: list[tuple[str, Row]] = []
        after = query.after
        while len(found) <= query.size:
            batch = self.store.read_model_view.job_rows(query.next_page(after), query.size + 1)
            rows = with_gone_snapshots(batch, self._snapshots_present(batch))[0]
            found.extend((key, row) for key, row in rows if query.matches(row))
            if len(batch) <= query.size:
                break
            after = int(batch[-1][1]["position"])
        page = found[: query.size]
        self.store.require_stored_heads([UUID(key) for key, _ in page])
        more = len(found) > query.size
        return JobPage([row for _, row in page], int(page[-1][1]["position"]) if more else None)

    def rows(self, view: str) -> list[Row]:
        """The view's rows, current; the job views with the snapshots found gone since
        (`read_model_rows.with_gone_snapshots`: checked here, on each read)."""
        if view not in {JOB_INDEX, NON_REPLAYABLE}:
            self.catch_up()
            return [row for _, row in self.view.rows(view)]
        if view == JOB_INDEX:
            return [row for _, row in self._job_views()[0]]
        return [row for _, row in self._gaps()]

    def gaps(self, tenant: str) -> list[Row]:
        """The tenant's non-replayable jobs (the dashboard's gaps), each job's stream held to its
        checkpointed head as the job listing's are (`jobs`)."""
        listed = [(key, row) for key, row in self._gaps() if row.get("tenant") == tenant]
        self.store.require_stored_heads([UUID(key) for key, _ in listed])
        return [row for _, row in listed]

    def _gaps(self) -> list[tuple[str, Row]]:
        """The non-replayable view by job stream id, current, with the jobs whose snapshots were
        found gone since."""
        gone = self._job_views()[1]
        recorded = dict(self.view.rows(NON_REPLAYABLE))
        return sorted((recorded | dict(gone)).items())

    def _job_views(self) -> tuple[list[tuple[str, Row]], list[tuple[str, Row]]]:
        """The job index by job stream id, current, and the gaps the snapshots found gone since
        add (`with_gone_snapshots`)."""
        self.catch_up()
        rows = self.view.rows(JOB_INDEX)
        return with_gone_snapshots(rows, self._snapshots_present(rows))

    def audit_records(self, tenant: str) -> list[Row]:
        """The audits of the tenant's jobs, newest first, current."""
        self.catch_up()
        rows = [row for _, row in self.view.rows(AUDIT_RECORDS) if row.get("tenant") == tenant]
        return sorted(rows, key=lambda row: int(row["position"]), reverse=True)

    def receipt_entries(self, tenant: str, after: int, limit: int) -> list[Row]:
        """The tenant's receipts numbered ``after + 1`` on, at most ``limit``, current."""
        self.catch_up()
        counted = self.view.row(RECEIPT_INDEX, tenant)
        count = 0 if counted is None else int(counted["count"])
        keys = [receipt_key(tenant, n) for n in range(after + 1, min(count, after + 1 + limit))]
        found = self.view.rows_at(RECEIPT_INDEX, keys)
        missing = [key for key in keys if key not in found]
        if missing:  # the index counts them: a row lost from the view, never a receipt to skip
            msg = f"read models: receipt index row {missing[0]} is missing; run 'mace rebuild'"
            raise IntegrityError(msg)
        return [found[key] for key in keys]

    def _snapshots_present(self, rows: list[tuple[str, Row]]) -> Callable[[str], bool]:
        """Whether each snapshot the jobs of ``rows`` declare is stored: all read together, in
        one query, unless one of them falls short of its checkpointed head; then each alone."""
        ids = sorted({sid for _, row in rows for sid in row.get("snapshot_ids", {}).values()})
        streams = {Snapshot.id_for(sid): sid for sid in ids}
        try:
            held = self.store.streams_held(list(streams))
        except IntegrityFailure:
            return cache(self._snapshot_present)
        return {streams[stream] for stream in held}.__contains__

    def _snapshot_present(self, snapshot_id: str) -> bool:
        # A snapshot a checkpoint counts that is gone fails closed wherever it is used (its
        # replays included); here it is what this view is for: a gap, listed with the job.
        try:
            return self.store.stream_exists(Snapshot.id_for(snapshot_id))
        except IntegrityFailure:
            return False

    def digests(self) -> dict[str, tuple[int, str]]:
        """Each view's row count and digest, as it stands."""
        digests = {}
        for view in VIEWS:
            rows = self.view.rows(view)
            digests[view] = (len(rows), view_digest(rows))
        return digests

    def rebuild(self, progress: Progress | None = None) -> list[RebuiltView]:
        """Project the whole log again from position 0 and compare with the live views."""
        self.catch_up()
        recorded = self.digests()
        self.view.reset(self.store.name)
        self._stamped = False  # the reset took the stamp with the rows: stamped again
        self.catch_up(progress)
        return _compared(recorded, self.digests())

    def compare(self, progress: Progress | None = None) -> list[RebuiltView]:
        """Project the log from position 0 to the views' own position into memory and compare
        with the views as they stand, writing nothing (a read store's rebuild: see above)."""
        position, recorded = self._standing()
        rebuilt = ReadModels(self.store, MemoryReadModelView())
        rebuilt.catch_up(progress, upto=position)
        return _compared(recorded, rebuilt.digests())

    def verify(self) -> None:
        """The views hold what the log makes up to their position (`compare`), else an
        `IntegrityFailure` naming the first view that does not: ``mace verify --all``'s check.

        Rows edited in the database (a job marked replayable, a halt row deleted) would mislead
        ``mace jobs --non-replayable`` and the dashboard while every event verifies. The views
        are derived from the verified log, so they are recomputed and compared, not signed: a
        digest a checkpoint covered would put the projection's version into the checkpoint's
        signed bytes (every change to `view_changes` would break the chain's meaning, and
        outside verifiers would have to know it), and the views lag the log by design, so no
        checkpoint could say at which position its digest holds. Recomputing costs one more
        pass over the projected events, of the order of the verify's own pass.
        """
        for result in self.compare():
            if not result.matches:
                reason = (
                    f"read model {result.view} is not what the log makes up to position"
                    f" {self.position()} (digest {result.recorded_digest}, the log makes"
                    f" {result.rebuilt_digest}): rows were edited; 'mace rebuild' makes it again"
                )
                raise IntegrityFailure(TABLE, 0, reason)

    def _standing(self) -> tuple[int, dict[str, tuple[int, str]]]:
        """The views' position and digests, read together: a catch-up committed by another
        process between the two (its rows and tracking move in one transaction) is read again."""
        retries = self.store.retries.start("read models: their rows, read while applied to")
        while True:
            position = self.position()
            digests = self.digests()
            if self.position() == position:
                return position, digests
            retries.lost()


def _compared(
    recorded: dict[str, tuple[int, str]], rebuilt: dict[str, tuple[int, str]]
) -> list[RebuiltView]:
    return [
        RebuiltView(view, rebuilt[view][0], recorded[view][1], rebuilt[view][1]) for view in VIEWS
    ]
