"""Importing a whole run (``mace ingest``: a Run Event Schema v1 file), once: the same content
sent again answers the job that recorded it.

`domain.run_content` says what "the same content" is. Nothing is read to find out before the
job is written: its content index is written in the job's own transaction, and the index's
unique key answers (the job's commit proves the index's head against the newest checkpoint first,
so an index deleted below it fails closed instead of letting the run be recorded twice). Only a
write that conflicts reads the index: two identical runs sent at the same time record one job,
the loser's write conflicts, and it answers the winner's job. Nothing is written for a duplicate.
"""

from __future__ import annotations

from domain.aggregate import MaceAggregate
from domain.errors import ConflictError
from domain.job import DEFAULT_TENANT
from domain.run_content import RunContent, RunContents
from domain.run_file import ParsedRun
from infrastructure.application.jobs import JobService
from infrastructure.application.runs import RunService
from infrastructure.storage.store import LedgerStore
from projections.reflective_log import ReflectiveLog


class _AlreadyRecorded(Exception):
    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


class RunImports:
    def __init__(self, store: LedgerStore, runs: RunService, jobs: JobService) -> None:
        self.store = store
        self.runs = runs
        self.jobs = jobs

    def record_once(
        self, run: ParsedRun, tenant: str = DEFAULT_TENANT
    ) -> tuple[ReflectiveLog, bool]:
        """Record ``run`` as a sealed job unless the tenant recorded the same content before.

        Returns the job's log and whether it was a duplicate (then nothing was written).
        `ClearPrivateValue` when an event records a value its privacy rules deny, in clear.
        """
        whole = [run.started, *run.events, run.completed]
        # Each part dumped and written once, for the privacy rules, the digest and the limits.
        contents = RunContents.of(run.started, run.events, run.completed)
        declared = run.started.declared_ids
        payloads = contents.payloads()
        self.runs.privacy.refuse_clear_private_values(declared, whole, payloads=payloads)
        name = RunContent.named(tenant, contents.digest())
        index = RunContent.id_for(name)

        def recorded_by() -> str | None:
            if not self.store.stream_exists(index):
                return None
            return self.store.repository.get_one(RunContent, index, f"run content {name}").job_id

        attempts = 0

        def indexed(job_id: str) -> list[MaceAggregate]:
            # A write tried again lost a race: to the same content's index, perhaps.
            nonlocal attempts
            attempts += 1
            earlier = None if attempts == 1 else recorded_by()
            if earlier is not None:
                raise _AlreadyRecorded(earlier)
            return [RunContent(name=name, job_id=job_id)]

        try:
            log = self.runs.record(
                run.started,
                run.events,
                run.completed,
                tenant,
                indexed,
                sizes=contents.event_sizes(),
            )
        except _AlreadyRecorded as exc:
            earlier = exc.job_id
        except ConflictError:
            # The job's named id is taken: by the job that recorded this very content, if any.
            found = recorded_by()
            if found is None:
                raise
            earlier = found
        else:
            return log, False
        return self.jobs.reflective_log(earlier, tenant=tenant), True
