"""What-if over a batch of recorded jobs (issue 31 point 3): ``mace audit --with KEY=ID``.

Every selected job is re-run under the changes through the one-job what-if
(`WhatIfService.report`: its two audit-mode replays, the same checks, nothing copied), one job
after another in this process. The batch is recorded once, as a `CounterfactualRecord` of kind
``whatif_batch`` (who, the changes, the selection, the expected changes, the totals and one row
per job), never authoritative, and nothing per job: the one-job use case records only when it
is asked for one job (`WhatIfService.run`), so a batch of a thousand jobs writes one event.

Jobs are selected either by name (``--jobs FILE``, ids of one tenant) or from the log: every
JobStarted after notification ``since`` up to ``until`` (the head when the batch begins, by
default), of one tenant or of all, in log order; each JobStarted is verified before its name is
trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from domain.errors import (
    ErrorCode,
    IntegrityFailure,
    InvalidInput,
    MaceError,
    NotFoundError,
    OpenJob,
)
from domain.governance import Actor
from domain.job import DEFAULT_TENANT, Job
from domain.naming import tenant_scoped
from domain.receipt import Unreplayable
from domain.replay_access import check_audit_roles
from domain.whatif import WhatIfChanges
from domain.whatif_batch import ExpectedChange
from domain.whatif_record import WHATIF_BATCH_KIND, WHATIF_BATCH_KIND_VERSION
from infrastructure.application.errors import Code, failure_of
from infrastructure.application.replays import SharedReads
from infrastructure.application.whatif import WhatIfService
from infrastructure.storage.records.signed_record import verify_record
from infrastructure.storage.store import LedgerStore
from infrastructure.storage.verification.ledger import JOB_STARTED_TOPIC
from infrastructure.storage.verification.scan import StreamRange
from projections.whatif_batch import OPEN, BatchVerdict, batch_report, failed_row, job_row

PAGE: Final = 1000
UNVERIFIED_START: Final = (
    "a job's JobStarted in the window does not verify: nothing it names is trusted"
)

JOB_FAILURES: Final = (MaceError, NotFoundError, InvalidInput, Unreplayable)
"""What stops one job's what-if and not the batch: its record (not found, open, not intact) or
a change it cannot be re-run under. A store that stops answering stops the batch."""


@dataclass(frozen=True)
class BatchSelection:
    """Which recorded jobs a batch re-runs: ``jobs`` by name (of ``tenant``, the default one when
    None), else every job whose JobStarted is in notifications ``since`` < id <= ``until`` (None:
    the head when the batch begins), of ``tenant`` or (None) of every tenant."""

    tenant: str | None = None
    since: int = 0
    until: int | None = None
    jobs: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.since < 0:
            raise InvalidInput(f"--since must be at least 0, got {self.since}")
        if self.until is not None and self.until <= self.since:
            msg = f"--until {self.until} must be after --since {self.since}: the window is empty"
            raise InvalidInput(msg)
        if self.jobs is not None and (self.since or self.until is not None):
            msg = "--jobs names the jobs itself: it takes no --since or --until"
            raise InvalidInput(msg)


@dataclass(frozen=True)
class BatchResult:
    record_id: str
    report: dict[str, Any]

    @property
    def passed(self) -> bool:
        """Nothing changed but what was expected, and no job failed: what a CI gate passes."""
        return BatchVerdict(self.report["verdict"]).passed


Row = dict[str, Any]
Told = Callable[[int], None]
"""Told how many of its jobs a worker has re-run so far."""


@dataclass(frozen=True)
class BatchPart:
    """What every worker of a batch is given: the selected jobs that can be re-run (each with
    its place in the selection), the changes, who acts and what is expected. Each worker re-runs
    the jobs whose streams are in its range (`WhatIfBatchService.rows`)."""

    jobs: tuple[tuple[int, str, str], ...]
    changes: WhatIfChanges
    actor: Actor
    expected: frozenset[ExpectedChange]

    def run(self, ledger: HoldsBatches, streams: StreamRange, progress: Told) -> dict[int, Row]:
        """In a worker (`audit_workers.RangeTask`): its jobs re-run through its own ledger."""
        return ledger.whatif_batches.rows(self, streams, progress)


class HoldsBatches(Protocol):
    """A ledger, as a worker opens it: its batch use case re-runs the worker's jobs."""

    @property
    def whatif_batches(self) -> WhatIfBatchService: ...


class Workers(Protocol):
    """The processes a batch re-runs its jobs in: `audit_workers.AuditWorkers`, started before
    any store was opened (this process takes the first range of streams itself)."""

    def each_range(
        self,
        task: BatchPart,
        here: Callable[[StreamRange, Told], dict[int, Row]],
        progress: Told,
    ) -> list[dict[int, Row]]:
        """``task`` done over every range, the first here through ``here``."""


EVERY_STREAM: Final[StreamRange] = (None, None)


class WhatIfBatchService:
    def __init__(self, store: LedgerStore, whatif: WhatIfService) -> None:
        self.store = store
        self.whatif = whatif

    def run(
        self,
        selection: BatchSelection,
        changes: WhatIfChanges,
        actor: Actor,
        expected: frozenset[ExpectedChange] = frozenset(),
        progress: Callable[[int, int], None] | None = None,
    ) -> BatchResult:
        """Every selected job re-run under ``changes`` in this process, one record for the
        batch (`report`, then `record`)."""
        return self.record(self.report(selection, changes, actor, expected, progress), actor)

    def report(
        self,
        selection: BatchSelection,
        changes: WhatIfChanges,
        actor: Actor,
        expected: frozenset[ExpectedChange] = frozenset(),
        progress: Callable[[int, int], None] | None = None,
        workers: Workers | None = None,
    ) -> dict[str, Any]:
        """Every selected job re-run under ``changes``, unrecorded: in this process, or split by
        stream among ``workers``; the same rows either way, in selection order. ACCESS_DENIED
        (nothing read) for an actor without an audit-mode replay role. ``progress`` is told the
        jobs re-run so far and how many are selected."""
        check_audit_roles(actor, "a what-if")
        through = selection.until
        if selection.jobs is None and through is None:
            through = self.store.recorder.max_notification_id() or 0
        selected = list(self._selected(selection, through))
        # A JobStarted that did not verify (`_selected`) names nothing: its row is known now.
        rows: dict[int, Row] = {
            n: failed_row(None, None, ErrorCode.INTEGRITY_FAILURE.value, UNVERIFIED_START)
            for n, (job_id, tenant) in enumerate(selected)
            if job_id is None or tenant is None
        }
        part = BatchPart(
            tuple(
                (n, job_id, tenant)
                for n, (job_id, tenant) in enumerate(selected)
                if job_id is not None and tenant is not None
            ),
            changes,
            actor,
            expected,
        )

        def told(done: int) -> None:
            if progress is not None:
                progress(len(rows) + done, len(selected))

        if workers is None:
            rows.update(self.rows(part, EVERY_STREAM, told))
        else:
            for found in workers.each_range(
                part, lambda streams, own: self.rows(part, streams, own), told
            ):
                rows.update(found)
        shown = {
            "tenant": selection.tenant,
            "since": selection.since,
            "until": through,
            "jobs": None if selection.jobs is None else list(selection.jobs),
        }
        return batch_report(
            [rows[n] for n in range(len(selected))], changes, actor, shown, expected
        )

    def record(self, report: dict[str, Any], actor: Actor) -> BatchResult:
        """The batch's one signed record (`WhatIfService.record`), never authoritative; the
        roles of `report` again, since this may be another ledger's (the primary's)."""
        check_audit_roles(actor, "a what-if")
        parameters = {
            "changes": report["changes"],
            "selection": report["selection"],
            "expected": report["expected"],
        }
        tenant = report["selection"]["tenant"] or DEFAULT_TENANT
        record = self.whatif.record(
            WHATIF_BATCH_KIND, WHATIF_BATCH_KIND_VERSION, parameters, report, actor, tenant
        )
        return BatchResult(record.record_id, report)

    def rows(self, part: BatchPart, streams: StreamRange, progress: Told) -> dict[int, Row]:
        """The rows of ``part``'s jobs whose streams are in ``streams``, by place in the
        selection. Each snapshot and halt record read, verified and judged once for them all, as
        an audit does (`SharedReads`): a halt appended while the batch runs is left to the next."""
        shared = SharedReads()
        found: dict[int, Row] = {}
        lower, upper = streams
        for n, job_id, tenant in part.jobs:
            stream = Job.id_for(tenant_scoped(tenant, job_id))
            if (lower is None or lower <= stream) and (upper is None or stream < upper):
                found[n] = self._row(
                    job_id, tenant, part.changes, part.actor, part.expected, shared
                )
                progress(len(found))
        return found

    def _row(
        self,
        job_id: str,
        tenant: str,
        changes: WhatIfChanges,
        actor: Actor,
        expected: frozenset[ExpectedChange],
        shared: SharedReads,
    ) -> Row:
        try:
            report = self.whatif.report(job_id, changes, actor, tenant, shared)
        except OpenJob as exc:
            # Still being recorded: skipped, as an audit skips it, not a failure of the batch.
            return failed_row(job_id, tenant, Code.INVALID_INPUT, exc.args[0], OPEN)
        except JOB_FAILURES as exc:
            answered = failure_of(exc)
            assert answered is not None  # every kind caught is in the error table
            return failed_row(job_id, tenant, answered.code, answered.message)
        return job_row(report, expected)

    def _selected(
        self, selection: BatchSelection, through: int | None
    ) -> Iterator[tuple[str | None, str | None]]:
        """``(job_id, tenant)`` of each selected job, in selection order; ``(None, None)`` for a
        JobStarted in the window that does not verify (its tenant unknown, it is never named)."""
        if selection.jobs is not None:
            tenant = selection.tenant or DEFAULT_TENANT
            yield from ((job_id, tenant) for job_id in selection.jobs)
            return
        assert through is not None
        start = selection.since + 1
        while start <= through:
            page = self.store.recorder.select_notifications(
                start, PAGE, stop=through, topics=[JOB_STARTED_TOPIC]
            )
            for started in _starts(self.store, page):
                if started is None:
                    yield None, None
                elif selection.tenant is None or started[1] == selection.tenant:
                    yield started
            if len(page) < PAGE:
                return
            start = page[-1].id + 1


def _starts(store: LedgerStore, page: Sequence[Any]) -> Iterator[tuple[str, str] | None]:
    """Each JobStarted's job id (as its tenant names it) and tenant, verified; None if not."""
    for stored in page:
        try:
            verified = verify_record(store.keyring, stored)
        except IntegrityFailure:
            yield None
            continue
        body = orjson.loads(verified.body)
        yield str(body["job_id"]), str(body.get("tenant", DEFAULT_TENANT))
