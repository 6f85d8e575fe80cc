"""A batch audit's verdicts: each job's, the totals, and what the audit did and did not check.

The replay of each job is `projections.replay.replay_job`, the one the live replay runs; this
module only sorts its outcome into a verdict, keeps the per-job results in a canonical order (by
the job's stream name, whatever the number of workers that found them) and says what the verdict
covers (DESIGN section 9: never "ok" for what was not checked). A job is ok only when its replay
reproduced it, authoritatively; one that replayed but that the replay could not reproduce (e.g. a
run recorded by another runtime with no Stage-0 iteration), or not authoritatively, is *taken as
recorded*: counted apart, never as ok. Every replayed job keeps its replay's check counts
(`replay_checks.tally`), and the totals add them up.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from domain.canonical import digest
from domain.errors import ErrorCode
from domain.naming import tenant_and_key
from projections.replay import ReplayOutcome
from projections.replay_checks import Check, tally

DIVERGENCE_CODES = (ErrorCode.REPLAY_DIVERGENCE, ErrorCode.RESULT_MISMATCH)
TAKEN_AS_RECORDED = "taken as recorded"


class Verdict(StrEnum):
    OK = "ok"
    DIVERGED = "diverged"
    INTEGRITY_FAILURE = "integrity_failure"
    NOT_REPLAYABLE = "not_replayable"
    OPEN = "open"  # not sealed: verified, skipped (only completed jobs are replayed)


@dataclass(frozen=True, slots=True)
class JobAudit:
    """One job's result: ``job`` is its stream's name (`Job.scoped_id`), unique in the store."""

    job: str
    stream: str
    verdict: Verdict
    code: str | None
    detail: str
    divergence: dict[str, Any] | None = None
    check_counts: dict[str, int] | None = None
    """How many of its facts each kind of check covered (`tally`); None: not replayed."""

    def as_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "stream": self.stream,
            "verdict": self.verdict.value,
            "code": self.code,
            "detail": self.detail,
            "divergence": self.divergence,
            "check_counts": self.check_counts,
        }

    @property
    def reason(self) -> str | None:
        """Why a job is not replayable: its error code, or that it was taken as recorded."""
        if self.verdict is not Verdict.NOT_REPLAYABLE:
            return None
        return self.code or TAKEN_AS_RECORDED


def judged(job: str, stream: str, outcome: ReplayOutcome) -> JobAudit:
    """The verdict on a completed job from its audit-mode replay."""
    code = outcome.error_code
    counts = tally(outcome.checks)
    if code is None:
        if outcome.ok and outcome.authoritative:
            return JobAudit(job, stream, Verdict.OK, None, "reproduced", check_counts=counts)
        reasons = outcome.non_authoritative or ["not reproduced"]
        detail = f"{TAKEN_AS_RECORDED}: " + "; ".join(reasons)
        return JobAudit(job, stream, Verdict.NOT_REPLAYABLE, None, detail, check_counts=counts)
    message = outcome.error_message or ""
    if code in DIVERGENCE_CODES:
        first = outcome.divergences[0].as_json() if outcome.divergences else None
        return JobAudit(job, stream, Verdict.DIVERGED, code.value, message, first, counts)
    if code is ErrorCode.INTEGRITY_FAILURE:
        verdict = Verdict.INTEGRITY_FAILURE
    else:
        verdict = Verdict.NOT_REPLAYABLE
    return JobAudit(job, stream, verdict, code.value, message, check_counts=counts)


def integrity_failed(job: str, stream: str, message: str) -> JobAudit:
    return JobAudit(
        job, stream, Verdict.INTEGRITY_FAILURE, ErrorCode.INTEGRITY_FAILURE.value, message
    )


@dataclass(frozen=True, slots=True)
class StreamFailure:
    """A stream outside the audited jobs that failed verification (``version``: where)."""

    stream: str
    version: int
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "version": self.version, "reason": self.reason}


@dataclass(frozen=True)
class AuditScope:
    """What an audit covers: one tenant's jobs (None: every tenant's), the jobs whose first event
    comes after notification ``since``."""

    tenant: str | None = None
    since: int = 0


@dataclass
class AuditFindings:
    """What scanning the log found: every event counted, each job judged, each other stream's
    failure; merged across workers (`then`) and ordered once (`ordered`)."""

    events: int = 0
    not_checkpointed: int = 0
    first_notification_id: int | None = None
    last_notification_id: int | None = None
    heads: dict[str, int] = field(default_factory=dict)
    """The last version the scan saw of each stream (by its id)."""
    jobs: list[JobAudit] = field(default_factory=list)
    stream_failures: list[StreamFailure] = field(default_factory=list)
    seals: dict[str, tuple[str, int, int, str]] = field(default_factory=dict)
    """Each sealed job's seal by job name: its stream, its version, its count and MAC digest."""
    witnesses: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Each seal witness by job name: the count and MAC digest it witnessed."""
    unnamed_failures: int = 0
    """Streams that failed verification, not named: outside a tenant's audit (`for_tenant`)."""
    earlier_seals: set[str] = field(default_factory=set)
    """The streams of jobs begun before the window (``since``) whose seal it met: not judged,
    so their witnesses are not held to a seal the scan never took in."""

    def saw(self, notification_id: int, stream: str, version: int, *, covered: bool) -> None:
        """One event read; ``covered``: the newest checkpoint covers it (or it is one)."""
        self.events += 1
        self.not_checkpointed += not covered
        if self.first_notification_id is None:
            self.first_notification_id = notification_id
        self.last_notification_id = notification_id
        self.heads[stream] = version

    def then(self, other: AuditFindings) -> AuditFindings:
        """These findings and another worker's, over streams apart from these."""
        both = (self, other)
        firsts = [f.first_notification_id for f in both if f.first_notification_id is not None]
        lasts = [f.last_notification_id for f in both if f.last_notification_id is not None]
        return AuditFindings(
            self.events + other.events,
            self.not_checkpointed + other.not_checkpointed,
            min(firsts, default=None),
            max(lasts, default=None),
            self.heads | other.heads,
            self.jobs + other.jobs,
            self.stream_failures + other.stream_failures,
            self.seals | other.seals,
            self.witnesses | other.witnesses,
            earlier_seals=self.earlier_seals | other.earlier_seals,
        )

    def ordered(self) -> AuditFindings:
        """Jobs by name, stream failures by stream; a failure of a stream whose job was already
        judged an integrity failure is that job's (a seal's witness meets the same damage)."""
        failed_jobs = {j.stream for j in self.jobs if j.verdict is Verdict.INTEGRITY_FAILURE}
        streams = {f.stream: f for f in self.stream_failures if f.stream not in failed_jobs}
        return AuditFindings(
            self.events,
            self.not_checkpointed,
            self.first_notification_id,
            self.last_notification_id,
            self.heads,
            sorted(self.jobs, key=lambda j: j.job),
            [streams[s] for s in sorted(streams)],
            self.seals,
            self.witnesses,
            earlier_seals=self.earlier_seals,
        )

    def for_tenant(self, tenant: str) -> AuditFindings:
        """What one tenant's audit may show: its own jobs; every other failure only counted.

        Another tenant's job, or a stream that names no job of this tenant, is never named (a
        tenant's id behaves as a free one for everyone else), but a failure anywhere is still
        one: counted, and the audit not ok."""
        own = [j for j in self.jobs if tenant_and_key(j.job)[0] == tenant]
        theirs = [j for j in self.jobs if tenant_and_key(j.job)[0] != tenant]
        failing = sum(j.verdict is Verdict.INTEGRITY_FAILURE for j in theirs)
        unnamed = self.unnamed_failures + len(self.stream_failures) + failing
        # Seals and witnesses were held to each other before: what is left names other jobs.
        return replace(
            self,
            jobs=own,
            stream_failures=[],
            unnamed_failures=unnamed,
            seals={},
            witnesses={},
            earlier_seals=set(),
        )

    def failed_job(self, name: str, message: str) -> bool:
        """Judge the job ``name`` an integrity failure (``message``), unless it already is one (its
        first failure stands); False if no such job was judged."""
        for position, job in enumerate(self.jobs):
            if job.job == name:
                if job.verdict is not Verdict.INTEGRITY_FAILURE:
                    self.jobs[position] = integrity_failed(name, job.stream, message)
                return True
        return False


@dataclass(frozen=True)
class AuditReport:
    """An audit's result, as printed and as its record keeps it (`summary`)."""

    scope: AuditScope
    through: int
    checkpoint: int | None  # the newest checkpoint's number when the audit began
    findings: AuditFindings
    checked: list[str]
    not_checked: list[str]

    @property
    def ok(self) -> bool:
        """No divergence and no integrity failure (not-replayable and open jobs are neither)."""
        bad = (Verdict.DIVERGED, Verdict.INTEGRITY_FAILURE)
        found = self.findings
        return (
            not found.stream_failures
            and not found.unnamed_failures
            and all(j.verdict not in bad for j in found.jobs)
        )

    def results(self) -> dict[str, Any]:
        """The per-job results and the other streams' failures, in canonical order."""
        return {
            "jobs": [j.as_json() for j in self.findings.jobs],
            "stream_failures": [f.as_json() for f in self.findings.stream_failures],
        }

    def fact_totals(self) -> dict[str, int]:
        """The facts of every replayed job, by how they were checked (`tally`'s kinds)."""
        totals = dict.fromkeys((check.value for check in Check), 0)
        for job in self.findings.jobs:
            for check, n in (job.check_counts or {}).items():
                totals[check] += n
        return totals

    @property
    def replayed(self) -> int:
        """How many jobs were replayed (their facts are in `fact_totals`)."""
        return sum(job.check_counts is not None for job in self.findings.jobs)

    def totals(self) -> dict[str, int]:
        count = Counter(j.verdict for j in self.findings.jobs)
        facts = {f"facts_{check}": n for check, n in self.fact_totals().items()}
        return {
            "events": self.findings.events,
            "streams": len(self.findings.heads),
            "jobs": len(self.findings.jobs),
            "ok": count[Verdict.OK],
            "diverged": count[Verdict.DIVERGED],
            "integrity_failures": count[Verdict.INTEGRITY_FAILURE],
            "not_replayable": count[Verdict.NOT_REPLAYABLE],
            "open": count[Verdict.OPEN],
            "stream_failures": len(self.findings.stream_failures) + self.findings.unnamed_failures,
            "not_yet_checkpointed": self.findings.not_checkpointed,
            **facts,
        }

    def not_replayable(self) -> dict[str, int]:
        """How many jobs are not replayable, by why (an error code, or taken as recorded)."""
        return dict(sorted(Counter(j.reason for j in self.findings.jobs if j.reason).items()))

    def summary(self) -> dict[str, Any]:
        """What the audit record keeps (beside who audited and when)."""
        return {
            "tenant": self.scope.tenant,
            "since": self.scope.since,
            "through": self.through,
            "first_notification_id": self.findings.first_notification_id,
            "last_notification_id": self.findings.last_notification_id,
            "totals": self.totals(),
            "not_replayable": self.not_replayable(),
            "results_digest": digest(self.results()),
            "checked": self.checked,
            "not_checked": self.not_checked,
        }


def coverage(
    scope: AuditScope, through: int, checkpoint: int | None, not_checkpointed: int
) -> tuple[list[str], list[str]]:
    """What an audit over ``scope`` up to notification ``through`` checked, and what it could
    not, with ``checkpoint`` the newest checkpoint's number (None: there is none)."""
    window = f"notifications {scope.since + 1} to {through}"
    checked = [
        f"every event's MAC and every stream's versions in {window}",
        "every sealed job's seal and its witness; every witness's seal",
        "every completed job replayed in audit mode (seed 000 section 6): its declared snapshots,"
        " halts and SEM versions read and verified as a replay reads them, SelfRepresentation"
        " and BrainState re-folded, each iteration re-run and every seed 004 field and the"
        " final answer compared with the record",
    ]
    not_checked = [
        "the checkpoint chain and the Merkle tree over the log (events moved in commit order):"
        " mace verify --all",
        "open jobs: verified, not replayed",
        "jobs taken as recorded (their answer was not recomputed): counted apart, not as ok",
    ]
    if checkpoint is None:
        not_checked.append("no checkpoint: a stream deleted whole leaves no trace")
    elif scope.since == 0:
        checked.append(f"every stream checkpoint {checkpoint} counts is there, at least as long")
    else:
        checked.append(
            f"every stream checkpoint {checkpoint} counts is there, at least as long (those the"
            f" window does not reach by their last stored version, not verified here)"
        )
    if not_checkpointed:
        not_checked.append(
            f"{not_checkpointed} events after the newest checkpoint: a job recorded there and"
            " deleted whole leaves no trace"
        )
    if scope.since:
        not_checked.append(f"jobs whose first event is at or before notification {scope.since}")
    if scope.tenant is not None:
        not_checked.append(
            "other tenants' jobs: their events verified, not replayed; a failure outside this"
            " tenant's jobs is counted (totals.stream_failures), never named"
        )
    return checked, not_checked
