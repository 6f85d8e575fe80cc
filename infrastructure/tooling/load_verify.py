"""What the load left in the store, read back through the ledger (never from the HTTP answers).

A run whose completion the service acknowledged must be a sealed job of the load test's tenant
holding exactly the events sent, once each, in the order sent (compared by content digest), then
the ledger's own completion with the final output sent and ``replayable: true``. A run the client
gave up on (its request failed) must be absent or, if its completion went through after all,
exact: never partly stored. Every replay the service answered must be recorded in its job's
governance as exactly one REPLAY_REQUEST and one REPLAY_RESULT of the attempt answered, ok, and
authoritative exactly when the run holds nothing the replay takes as recorded. Reading a job
verifies its MACs, versions, seal and seal witness on the way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from domain.canonical import digest
from domain.errors import MaceError, NotFoundError
from domain.events import JobCompleted
from domain.governance import Governance, ReplayRequestFields
from infrastructure.application.ledger import Ledger
from infrastructure.tooling.load_workload import PlannedRun

MAX_PROBLEMS = 20
"""How many problems the report lists (all are counted)."""
NOT_RECORDED = "not recorded"


class VerificationTimeout(Exception):
    """The load test's deadline passed while the store was being read back."""


@dataclass
class Verification:
    runs_planned: int = 0
    runs_acknowledged: int = 0
    runs_verified: int = 0
    abandoned_absent: int = 0
    abandoned_recorded: int = 0
    events_sent: int = 0
    events_found: int = 0
    replays_answered: int = 0
    replays_verified: int = 0
    problem_count: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(message)

    @property
    def ok(self) -> bool:
        return (
            self.problem_count == 0
            and self.runs_verified == self.runs_acknowledged
            and self.events_found == self.events_sent
            and self.replays_verified == self.replays_answered
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "runs_planned": self.runs_planned,
            "runs_acknowledged": self.runs_acknowledged,
            "runs_verified": self.runs_verified,
            "abandoned_runs_absent": self.abandoned_absent,
            "abandoned_runs_recorded_exactly": self.abandoned_recorded,
            "events_sent": self.events_sent,
            "events_found": self.events_found,
            "replays_answered": self.replays_answered,
            "replays_verified": self.replays_verified,
            "problem_count": self.problem_count,
            "problems": self.problems,
            "ok": self.ok,
        }


def verify_store(
    ledger: Ledger,
    runs: Sequence[PlannedRun],
    acknowledged: Collection[str],
    attempts: Mapping[str, int],
    tenant: str,
    expired: Callable[[], bool] = lambda: False,
) -> Verification:
    """Check every planned run and answered replay against the store.

    ``acknowledged``: the runs whose completion was answered 200; ``attempts``: run id -> the
    replay attempt the service answered.
    """
    result = Verification(runs_planned=len(runs))
    for run in runs:
        if expired():
            raise VerificationTimeout(f"reading back run {run.run_id}")
        found, problem = _recorded_events(ledger, run, tenant)
        if run.run_id in acknowledged:
            result.runs_acknowledged += 1
            result.events_sent += len(run.digests)
            result.events_found += found
            if problem is None:
                result.runs_verified += 1
            else:
                result.problem(f"run {run.run_id}: {problem}")
        elif problem == NOT_RECORDED:
            result.abandoned_absent += 1
        elif problem is None:
            result.abandoned_recorded += 1
        else:
            result.problem(f"abandoned run {run.run_id}: {problem}")
        if run.run_id in attempts:
            result.replays_answered += 1
            problem = _replay_problem(ledger, run, tenant, attempts[run.run_id])
            if problem is None:
                result.replays_verified += 1
            else:
                result.problem(f"replay of {run.run_id}: {problem}")
    return result


def _recorded_events(ledger: Ledger, run: PlannedRun, tenant: str) -> tuple[int, str | None]:
    """How many of the run's events the store holds, and what is wrong (None: nothing)."""
    try:
        job = ledger.jobs.get(run.run_id, tenant=tenant)
    except NotFoundError:
        return 0, NOT_RECORDED
    except MaceError as exc:
        return 0, f"{exc.code.value}: {exc.message}"
    facts = [f for f in job.facts if f.event_type != JobCompleted.EVENT_TYPE]
    found = tuple(digest({"type": f.event_type, **f.payload}) for f in facts)
    last = job.facts[-1] if job.facts else None
    completion = last.payload if last and last.event_type == JobCompleted.EVENT_TYPE else {}
    checks = [
        (job.sealed, "the job is not sealed"),
        (found == run.digests, _difference(run.digests, found)),
        (
            len(job.facts) == len(facts) + 1 and bool(completion),
            "the ledger's completion is not the job's one last event",
        ),
        (
            completion.get("final_output") == run.final_output,
            "the recorded final output is not the one sent",
        ),
        (completion.get("replayable") is True, "recorded as not replayable"),
    ]
    return len(found), next((message for ok, message in checks if not ok), None)


def _difference(sent: Sequence[str], found: Sequence[str]) -> str:
    """How the stored events differ from those sent (empty when they do not)."""
    duplicates = len(found) - len(set(found))
    if len(found) != len(sent):
        detail = f"{len(found)} events stored, {len(sent)} sent"
        return detail + (f" ({duplicates} stored twice)" if duplicates else "")
    first = next((n for n, (a, b) in enumerate(zip(sent, found, strict=True)) if a != b), None)
    return "" if first is None else f"event {first} differs from the one sent (content digest)"


def _replay_problem(ledger: Ledger, run: PlannedRun, tenant: str, attempt: int) -> str | None:
    """What is wrong with the tenant's job's one recorded replay (None: nothing)."""
    try:
        scope = ledger.governance.existing_job_scope(run.run_id, tenant)
        events = list(ledger.records.decoded(Governance.id_for(scope)))
    except NotFoundError:
        return "its job is not in the store"
    except MaceError as exc:
        return f"{exc.code.value}: {exc.message}"
    requests = [e for e in events if isinstance(e, ReplayRequestFields)]
    results = [e for e in events if isinstance(e, Governance.ReplayResulted)]
    if (len(requests), len(results)) != (1, 1):
        return f"{len(requests)} REPLAY_REQUEST and {len(results)} REPLAY_RESULT recorded, not 1"
    request, result = requests[0], results[0]
    checks = [
        (
            (request.attempt, result.attempt) == (attempt, attempt),
            f"recorded attempt {result.attempt}, the service answered {attempt}",
        ),
        (result.ok, f"recorded as failed: {result.error_code}"),
        (
            result.authoritative == run.authoritative,
            f"recorded as {'' if result.authoritative else 'not '}authoritative",
        ),
    ]
    return next((message for ok, message in checks if not ok), None)
