"""The replay record: one replay attempt's verification steps and report, append-only and signed.

Seed 000 section 6 asks that every verification step be logged in a replay audit result. Each
attempt of a job gets its own record, named ``<job_id>#<attempt>`` (the attempt number comes from
the job's governance record, where the attempt's REPLAY_REQUEST and REPLAY_RESULT live). The
record's ``job_id`` is the job's id scoped by its tenant (`Job.scoped_id`), as in governance.
Steps are appended in the order the replay took them; the report is stored last, as the record's
closing event.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.naming import tenant_and_key


def replay_record_name(job_id: str, attempt: int) -> str:
    return f"{job_id}#{attempt}"


class ReplayRecord(MaceAggregate):
    NAME_PREFIX = "replay"
    NAME_FIELD = "replay_id"

    class Opened(MaceAggregate.Created):
        replay_id: str
        job_id: str
        attempt: int
        mode: str

    class StepLogged(MaceAggregate.Event):
        step: str
        outcome: str
        detail: str

    class ReportStored(MaceAggregate.Event):
        report: dict[str, Any]
        markdown: str

    @classmethod
    def open(cls, job_id: str, attempt: int, mode: str) -> ReplayRecord:
        return cls(
            replay_id=replay_record_name(job_id, attempt), job_id=job_id, attempt=attempt, mode=mode
        )

    @event(Opened)
    def __init__(self, replay_id: str, job_id: str, attempt: int, mode: str) -> None:
        self.replay_id = replay_id
        self.job_id = job_id
        self.attempt = attempt
        self.mode = mode
        self.steps: list[dict[str, str]] = []
        self.report: dict[str, Any] | None = None
        self.markdown: str | None = None

    def log_step(self, step: str, outcome: str, detail: str) -> None:
        if self.report is not None:
            msg = f"replay {self.replay_id} is closed by its report: no step may follow it"
            raise ValueError(msg)
        self._step_logged(step=step, outcome=outcome, detail=detail)

    @event(StepLogged)
    def _step_logged(self, step: str, outcome: str, detail: str) -> None:
        self.steps.append({"step": step, "outcome": outcome, "detail": detail})

    def store_report(self, report: dict[str, Any], markdown: str) -> None:
        if self.report is not None:
            msg = f"replay {self.replay_id} already has its report"
            raise ValueError(msg)
        self._report_stored(report=report, markdown=markdown)

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
