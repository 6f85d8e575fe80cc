"""Importing a whole run (``mace ingest``: a Run Event Schema v1 file), once: the same content
sent again answers the job that recorded it.

`domain.run_content` says what "the same content" is. The check runs before the job is built
and again inside the job's transaction attempt, so two identical runs sent at the same time
record one job: the loser's index write conflicts, its retry finds the index, and it answers
the winner's job. Nothing is written for a duplicate.
"""

from __future__ import annotations

from domain.aggregate import MaceAggregate
from domain.job import DEFAULT_TENANT
from domain.run_content import RunContent, run_content_digest
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
        self.runs.privacy.refuse_clear_private_values(run.started.declared_ids, whole)
        digest = run_content_digest(run.started, run.events, run.completed)
        name = RunContent.named(tenant, digest)
        index = RunContent.id_for(name)

        def recorded_by() -> str | None:
            if not self.store.stream_exists(index):
                return None
            return self.store.repository.get_one(RunContent, index, f"run content {name}").job_id

        def indexed(job_id: str) -> list[MaceAggregate]:
            earlier = recorded_by()
            if earlier is not None:
                raise _AlreadyRecorded(earlier)
            return [RunContent(name=name, job_id=job_id)]

        earlier = recorded_by()
        if earlier is None:
            try:
                log = self.runs.record(run.started, run.events, run.completed, tenant, indexed)
            except _AlreadyRecorded as exc:
                earlier = exc.job_id
            else:
                return log, False
        return self.jobs.reflective_log(earlier, tenant=tenant), True
