"""The replay record: one replay attempt's verification steps and report, in one signed event.

Seed 000 section 6 asks that every verification step be logged in a replay audit result. Each
attempt of a job gets its own record, named ``<job_id>#<attempt>`` (the attempt number comes from
the job's governance record, where the attempt's REPLAY_REQUEST and REPLAY_RESULT live). The
record's ``job_id`` is the job's id scoped by its tenant (`Job.scoped_id`), as in governance.
The steps, in the order the replay took them, and the report are written once, whole, as the
record's one event: a replay writes three events in all (request, record, result). Records
written before were an opening event, one event per step and the report: they still load.
"""

from __future__ import annotations

from typing import Any, ClassVar

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.naming import tenant_and_key


def replay_record_name(job_id: str, attempt: int) -> str:
    return f"{job_id}#{attempt}"


class ReplayRecord(MaceAggregate):
    NAME_PREFIX = "replay"
    NAME_FIELD = "replay_id"

    class Opened(MaceAggregate.Created):
        # Version 1 opened a record that steps and a report were appended to, one event each.
        class_version: ClassVar[int] = 2
        replay_id: str
        job_id: str
        attempt: int
        mode: str
        steps: list[dict[str, str]]
        report: dict[str, Any] | None
        markdown: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(steps=[], report=None, markdown=None)

    class StepLogged(MaceAggregate.Event):
        step: str
        outcome: str
        detail: str

    class ReportStored(MaceAggregate.Event):
        report: dict[str, Any]
        markdown: str

    @classmethod
    def recorded(
        cls,
        job_id: str,
        attempt: int,
        mode: str,
        steps: list[tuple[str, str, str]],
        report: dict[str, Any],
        markdown: str,
    ) -> ReplayRecord:
        """The whole record of one attempt: its steps as (step, outcome, detail), its report."""
        return cls(
            replay_id=replay_record_name(job_id, attempt),
            job_id=job_id,
            attempt=attempt,
            mode=mode,
            steps=[{"step": s, "outcome": o, "detail": d} for s, o, d in steps],
            report=report,
            markdown=markdown,
        )

    @event(Opened)
    def __init__(
        self,
        replay_id: str,
        job_id: str,
        attempt: int,
        mode: str,
        steps: list[dict[str, str]],
        report: dict[str, Any] | None,
        markdown: str | None,
    ) -> None:
        self.replay_id = replay_id
        self.job_id = job_id
        self.attempt = attempt
        self.mode = mode
        self.steps = list(steps)
        self.report = report
        self.markdown = markdown

    # A version 1 record's later events, applied as they were written.

    @event(StepLogged)
    def _step_logged(self, step: str, outcome: str, detail: str) -> None:
        self.steps.append({"step": step, "outcome": outcome, "detail": detail})

    @event(ReportStored)
    def _report_stored(self, report: dict[str, Any], markdown: str) -> None:
        self.report = report
        self.markdown = markdown

    def as_json(self) -> dict[str, Any]:
        """The record as its tenant sees it: the job's own id, not its scoped one."""
        job_id = tenant_and_key(self.job_id)[1]
        return {
            "replay_id": replay_record_name(job_id, self.attempt),
            "job_id": job_id,
            "attempt": self.attempt,
            "mode": self.mode,
            "steps": self.steps,
            "report": self.report,
            "report_markdown": self.markdown,
        }
