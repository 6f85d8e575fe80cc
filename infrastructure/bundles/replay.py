"""Replay straight from a bundle: no database, no live dependency, nothing recorded.

The bundle's verified records are read through an in-memory ledger, so the replay runs the very
`replay_job` (and the ledger's reads, verified) that ``mace replay JOB_ID`` runs. Access is
decided by the replay use case's own rules (`ReplayService.replay_unrecorded`, with
``MACE_ACTOR``/``MACE_ROLES``), on the job's governance record carried in the bundle: a
production replay approved by the council there, or a force-continue an admin requested and the
council approved there, are honoured. There is no store, so no REPLAY_REQUEST or REPLAY_RESULT
is appended: the report says ``"recorded": false`` and its attempt is 0.

A redacted bundle cannot be authoritative. Its replay runs on past every divergence and then sets
aside the ones redaction explains (a model I/O field that matches once the replayed content is
reduced to its hashes as the export did; anything in an iteration, or job-wide, whose recorded
text had PII taken out); each set-aside comparison is logged as skipped. The first divergence
redaction does not explain fails the replay as usual. ``--force-continue`` is refused on it: its
replay already continues, and only past what redaction hid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, Final

from domain.canonical import canonical_json
from domain.errors import ErrorCode
from domain.governance import Actor
from domain.job import Job
from domain.replay_access import ReplayMode, check_mocks_allowed
from domain.stage0.agents import AgentReply
from infrastructure.application.records import configured_keyring
from infrastructure.application.replays import ReplayResult
from infrastructure.application.settings import Settings
from infrastructure.bundles.format import Bundle, BundleError, bundle_ledger, read_bundle
from projections.redaction import ANSWER_FIELDS, MODEL_IO, PII, PII_MARK, strip_model_io
from projections.replay import Divergence, ReplayOutcome, StepLog
from projections.replay_checks import Check, FactCheck
from projections.replay_report import render_markdown, replay_report

NOT_RECORDED: Final = 0
"""The attempt number of a bundle replay: there is no store to number (or record) it in."""
FORCED_STEP: Final = " (forced: continuing)"
FORCED_REASON: Final = "forced past divergences with a council-approved force-continue"


def replay_bundle(
    bundle: Bundle,
    mode: ReplayMode,
    actor: Actor,
    *,
    force_continue: bool = False,
    mocks: Mapping[str, AgentReply] | None = None,
    elapsed: Callable[[], float] | None = None,
) -> ReplayResult:
    """Seed 000 section 6 over a verified bundle, recorded nowhere."""
    check_mocks_allowed(mode, bool(mocks))  # bad options are refused in the order they always were
    check_replay_options(bundle, force_continue)
    with bundle_ledger(bundle) as ledger:
        outcome = ledger.replays.replay_unrecorded(
            bundle.job_id,
            mode,
            actor,
            tenant=bundle.tenant,
            force_continue=force_continue,
            run_on=bundle.redacted,
            mocks=mocks,
            elapsed=elapsed,
            carries_tenant_state=False,
        )
        # ACCESS_DENIED: refused before it ran, so there is nothing redaction could explain.
        if bundle.redacted and outcome.error_code is not ErrorCode.ACCESS_DENIED:
            job = ledger.jobs.get(bundle.job_id, tenant=bundle.tenant)
            outcome = set_aside_redactions(outcome, RedactionScope.of(bundle, job))
    report = replay_report(outcome, actor, NOT_RECORDED, force_continue, bundle.tenant)
    report["bundle"] = {
        "file": bundle.name,
        "recorded": False,
        "redacted": bundle.redacted,
        "records": bundle.manifest.counts.get("records", 0),
        "checkpoint": bundle.inclusion.facts(),
    }
    markdown = render_markdown(report) + (
        f"\n_Replayed from bundle `{bundle.name}`: nothing was recorded (no store). Its"
        f" records: {bundle.inclusion.summary()}._\n"
    )
    return ReplayResult(NOT_RECORDED, outcome, report, markdown)


def check_replay_options(bundle: Bundle, force_continue: bool) -> None:
    if bundle.redacted and force_continue:
        msg = (
            f"--force-continue is not available on redacted bundle {bundle.name}: its replay"
            " already continues past what redaction hid, and never past anything else"
        )
        raise BundleError(msg)


REGRESSION_ACTOR: Final = Actor.of("regression-test", ["auditor"])


def replay_bundle_file(
    path: Path,
    mode: str = ReplayMode.AUDIT.value,
    actor: Actor = REGRESSION_ACTOR,
    force_continue: bool = False,
) -> dict[str, Any]:
    """Replay a bundle file with the keyring the environment names; the report. For tests
    (``mace export-test`` writes ones that call this) and scripts."""
    bundle = read_bundle(path, configured_keyring(Settings()))
    return replay_bundle(bundle, ReplayMode(mode), actor, force_continue=force_continue).report


_MODEL_IO_COMPARISONS = frozenset({"agent_outputs", "events.AgentOutput"})
"""The comparisons of model calls: the trace's entries and the events themselves."""
_SHAPE: Final = frozenset({"iterations", "tool_boundary", "retrieval_boundary"})
_HASH_FIELDS: Final = (" request_hash", " response_hash")


class RedactionScope:
    """What a redacted bundle's replay cannot compare: where its job had PII taken out."""

    def __init__(
        self,
        pii_iterations: set[int],
        pii_in_job: bool,
        answer_hidden: bool,
        records: int,
        input_redacted: bool,
    ) -> None:
        self.pii_iterations = pii_iterations
        self.pii_in_job = pii_in_job
        self.answer_hidden = answer_hidden
        self.records = records
        self.input_redacted = input_redacted

    @classmethod
    def of(cls, bundle: Bundle, job: Job) -> RedactionScope:
        assert bundle.manifest.redaction is not None
        iterations: set[int] = set()
        in_job = answer_hidden = input_redacted = False
        redacted = bundle.manifest.redaction.records
        for record in redacted:
            if record.stream != f"{Job.NAME_PREFIX}:{job.job_id}":
                continue
            answer_hidden = answer_hidden or MODEL_IO in record.reasons
            if PII not in record.reasons:
                continue
            in_job = True
            input_redacted = input_redacted or record.version == 1
            position = record.version - 2  # version 1 starts the job; facts follow
            if 0 <= position < len(job.facts):
                iteration = job.facts[position].payload.get("iteration")
                if isinstance(iteration, int):
                    iterations.add(iteration)
        return cls(iterations, in_job, answer_hidden, len(redacted), input_redacted)

    def explain(self, divergence: Divergence) -> tuple[Hidden, str] | None:
        """How and why redaction explains this divergence, or None when it does not.

        Redaction rewrites content, never a run's shape (iteration numbers, which call or request
        an answer answers) nor a hash, so those comparisons are never explained by it; the job's
        input against its first percept only where PII was taken from the job's input."""
        field = divergence.field
        if field in _SHAPE or field.endswith(_HASH_FIELDS):
            return None
        if field == "job_input":
            why = f"{PII} redacted from the job input"
            return (Hidden.PII, why) if self.input_redacted else None
        return self._content_hidden(divergence)

    def _content_hidden(self, divergence: Divergence) -> tuple[Hidden, str] | None:
        if divergence.field in _MODEL_IO_COMPARISONS and canonical_json(
            strip_model_io(divergence.replayed)
        ) == canonical_json(divergence.recorded):
            return Hidden.BY_HASH, f"{MODEL_IO} content redacted; the rest matches the record"
        if self.answer_hidden and divergence.field in ANSWER_FIELDS and not divergence.recorded:
            return Hidden.ANSWER, f"{MODEL_IO} content redacted: the answer is not in the bundle"
        if divergence.iteration in self.pii_iterations:
            return Hidden.PII, f"{PII} redacted from iteration {divergence.iteration}"
        if divergence.iteration is None and self.pii_in_job:
            return Hidden.PII, f"{PII} redacted from the job"
        if PII_MARK in canonical_json(divergence.recorded).decode():
            return Hidden.PII, f"{PII} redacted from the recorded value"
        return None


_COMPARED: Final = frozenset({Check.DIVERGED, Check.REEXECUTED, Check.HASH_COMPARED})
"""The rows redaction may have hidden the comparison of."""
_HOLD_MODEL_IO: Final = (" AgentOutput", " IterationTrace")
"""The rows of the events whose model I/O content a redacted bundle empties."""


class Hidden(Enum):
    """How redaction hid what a divergence compared: model I/O content emptied while its hashes
    still match (compared by hash), the answer left out, or PII taken out (not compared)."""

    BY_HASH = "by hash"
    ANSWER = "answer"
    PII = "pii"


@dataclass
class HiddenFacts:
    """What redaction hid, by iteration (None: the job's own facts): a row diverged there is
    said to be compared as far as redaction let it be, or not compared, and why."""

    by_iteration: dict[int | None, dict[Hidden, str]] = field(default_factory=dict)

    def add(self, iteration: int | None, hidden: Hidden, why: str) -> None:
        self.by_iteration.setdefault(iteration, {}).setdefault(hidden, why)

    def without(self, iterations: set[int | None]) -> HiddenFacts:
        kept = {k: v for k, v in self.by_iteration.items() if k not in iterations}
        return HiddenFacts(kept)

    def as_left(self, row: FactCheck) -> FactCheck:
        """``row`` as redaction left it: a row diverged only where redaction explains it, and
        no fact of an iteration PII was taken out of compared (its re-run ran on the marks)."""
        hidden = self.by_iteration.get(row.iteration)
        if row.check not in _COMPARED or hidden is None:
            return row
        holds_answer = row.subject == "final answer" or row.subject.endswith(" IterationTrace")
        for kind in (Hidden.PII, Hidden.ANSWER):
            if kind in hidden and (kind is Hidden.PII or holds_answer):
                detail = f"not compared: {hidden[kind]}"
                return replace(row, check=Check.TAKEN_AS_RECORDED, detail=detail)
        if row.check is Check.HASH_COMPARED:
            return row
        if Hidden.BY_HASH in hidden and row.subject.endswith(_HOLD_MODEL_IO):
            detail = (
                "re-executed; compared where the bundle's redaction left content, emptied"
                " content by its hash where it has one"
            )
            return replace(row, check=Check.HASH_COMPARED, detail=detail)
        detail = "re-executed and equal to the record (redaction hid other facts of its iteration)"
        return replace(row, check=Check.REEXECUTED, detail=detail)


def set_aside_redactions(outcome: ReplayOutcome, scope: RedactionScope) -> ReplayOutcome:
    """The outcome of a run-on replay of a redacted bundle, with what redaction explains set
    aside: stopped at the first divergence it does not explain, as an unforced replay would."""
    result = ReplayOutcome(
        outcome.job_id,
        outcome.mode,
        capture_mode=outcome.capture_mode,
        snapshot_ids=outcome.snapshot_ids,
        unreconstructable=outcome.unreconstructable,
        halt_snapshots=outcome.halt_snapshots,
        non_authoritative=[r for r in outcome.non_authoritative if r != FORCED_REASON],
    )
    hidden = HiddenFacts()
    divergences = iter(outcome.divergences)
    set_aside = 0
    stopped = False
    for step in outcome.steps:
        if step.outcome == "failed" and step.detail.endswith(FORCED_STEP):
            divergence = next(divergences)
            explained = scope.explain(divergence)
            if explained is not None:
                kind, why = explained
                result.steps.append(StepLog(step.step, "skipped", f"not compared: {why}"))
                hidden.add(divergence.iteration, kind, why)
                set_aside += 1
                continue
            result.steps.append(StepLog(step.step, "failed", step.detail.removesuffix(FORCED_STEP)))
            where = "job" if divergence.iteration is None else f"iteration {divergence.iteration}"
            result.divergences.append(divergence)
            result.error_code = divergence.code
            result.error_message = f"{where}: {divergence.field} differs from the record"
            stopped = True
            break
        if step.step != "result":
            result.steps.append(step)
    if not stopped:
        ran_to_end = any(step.step == "result" for step in outcome.steps)
        if ran_to_end:
            detail = f"replay reproduced the job except {set_aside} comparison(s) redaction hid"
            result.steps.append(StepLog("result", "ok", detail))
        else:  # stopped by something other than a divergence: that stop stands
            result.error_code = outcome.error_code
            result.error_message = outcome.error_message
    result.non_authoritative.append(
        f"replayed from a redacted bundle ({scope.records} record(s) redacted):"
        f" {set_aside} comparison(s) could not be made"
    )
    left = hidden.without({d.iteration for d in result.divergences})
    result.checks = [left.as_left(row) for row in outcome.checks]
    return result
