"""The re-execution harness: an outside agent's code run again against its recorded run.

    with replay_harness(ledger.recordings, job_id, actor) as h:
        answer = my_agent(h)  # h.model_call, h.tool_call, h.retrieve, h.policy, h.rng, h.clock
        h.final_output(answer)
    h.result.outcome.authoritative

The agent gets its non-deterministic boundaries back from the recording (`projections.reexecution`
matches each call against the next recorded one, purely); this module does the I/O. The attempt
is recorded like any replay (`ReplayService.attempt`): the signed REPLAY_REQUEST (actor, roles,
mode) before the code runs, the REPLAY_RESULT, replay record and report after it, whatever the
code did. A divergence raises `ReplayDiverged` (``REPLAY_DIVERGENCE``) out of the call that left
the recording, and out of the block, after the result is recorded.

Where the recording comes from is a narrow protocol (`RecordingSource`): in process, the ledger
itself (`LedgerRecordings`); a client of the HTTP service can implement the same two steps, so
the matching and the agent-facing API stay the same whichever way the recording is reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

from domain.determinism import AGENT_RNG_STREAM, DeterministicRNG, TickingClock
from domain.errors import ErrorCode, InvalidInput, MaceError
from domain.events import WorkloadIdentity
from domain.governance import Actor
from domain.naming import DEFAULT_TENANT
from domain.policy import PolicyBundle, parse_bundle
from domain.replay_access import ReplayMode, parse_mode
from infrastructure.application.personal_data import REEXECUTION_CHANNEL, PersonalDataReads
from infrastructure.application.replays import (
    ReplayAttempt,
    ReplayResult,
    ReplayService,
    access_refused,
)
from projections.reexecution import (
    NO_ANSWER_KEPT,
    CallKind,
    Recording,
    Reexecution,
)
from projections.reflective_log import recorded_events
from projections.replay import ReplayOutcome

HARNESS_MODES = (ReplayMode.REEXECUTE, ReplayMode.PRODUCTION)

AgentCode = Callable[["ReplayHarness", str], Any]
"""An agent's code as `reexecute` runs it: given the harness and the run's input, it makes its
calls through the harness and returns its final answer."""


class OpenRecording(Protocol):
    """One recorded attempt at re-executing a job, its request already on record."""

    recording: Recording

    def policy_bundle(self, bundle_hash: str) -> str | None:
        """The YAML of the policy bundle the ledger holds for the job's tenant by this hash,
        verified; None when it holds none."""

    def close(self, outcome: ReplayOutcome) -> ReplayResult:
        """Record the attempt's outcome (result, replay record, report)."""


class RecordingSource(Protocol):
    """Where the harness gets a recording and records its outcome."""

    def open_recording(
        self, job_id: str, mode: ReplayMode, actor: Actor, tenant: str
    ) -> OpenRecording:
        """Record the request and return the job's recording; a refusal (access, a job that
        fails verification) is recorded as the attempt's outcome and raised (`MaceError`)."""


class LedgerRecordings:
    """`RecordingSource` over the ledger, in process (``ledger.recordings``)."""

    def __init__(self, replays: ReplayService, personal_data: PersonalDataReads) -> None:
        self._replays = replays
        self._personal_data = personal_data

    def open_recording(
        self, job_id: str, mode: ReplayMode, actor: Actor, tenant: str
    ) -> _LedgerRecording:
        return _LedgerRecording(self._replays, self._personal_data, job_id, mode, actor, tenant)


class _LedgerRecording:
    def __init__(
        self,
        replays: ReplayService,
        personal_data: PersonalDataReads,
        job_id: str,
        mode: ReplayMode,
        actor: Actor,
        tenant: str,
    ) -> None:
        self._replays = replays
        self._tenant = tenant
        self._stack = ExitStack()
        self._attempt: ReplayAttempt = self._stack.enter_context(
            replays.attempt(job_id, mode, actor, tenant=tenant)
        )
        step = "1 load recording"
        refused = access_refused(job_id, mode, actor, self._attempt.production_approved)
        if refused is None:
            try:
                job = self._attempt.source.load_job(job_id)
            except MaceError as failed:  # the job's stream fails verification
                refused = ReplayOutcome.stopped(
                    job_id, mode, step, failed.code, f"job stream: {failed.message}"
                )
        if refused is None:
            withheld = personal_data.withheld_from(job_id, tenant, actor, REEXECUTION_CHANNEL)
            if withheld is not None:
                refused = ReplayOutcome.stopped(
                    job_id, mode, step, ErrorCode.ACCESS_DENIED, withheld
                )
        if refused is not None:
            self.close(refused)
            raise MaceError(
                refused.error_code or ErrorCode.ACCESS_DENIED, refused.error_message or ""
            )
        self.recording = Recording(
            job.job_id,
            job.job_seed,
            job.job_input,
            job.capture_mode,
            dict(job.snapshot_ids),
            recorded_events(job),
        )

    def policy_bundle(self, bundle_hash: str) -> str | None:
        return self._replays.policy.held_bundles(self._tenant).get(bundle_hash)

    def close(self, outcome: ReplayOutcome) -> ReplayResult:
        self._attempt.outcome = outcome
        self._stack.close()
        assert self._attempt.result is not None
        return self._attempt.result


class ReplayHarness:
    """What the re-executed code calls instead of its model, tools, retriever, policy engine,
    RNG and clock; every answer from the recording (`projections.reexecution`)."""

    def __init__(self, opened: OpenRecording, mode: ReplayMode) -> None:
        self._opened = opened
        self._matching = Reexecution(opened.recording, mode)
        seed = opened.recording.job_seed
        self._rng = DeterministicRNG(seed, AGENT_RNG_STREAM)
        self._clock = TickingClock(seed)
        self._final_output: Any = NO_ANSWER_KEPT
        self.result: ReplayResult | None = None
        """The recorded attempt (number, outcome, report), once the block has ended."""

    @property
    def recording(self) -> Recording:
        return self._opened.recording

    def model_call(self, model_id: str, prompt: Any, *, mock: Any = NO_ANSWER_KEPT) -> Any:
        """The recorded response to this prompt, when it is the run's next call, to this model.

        ``mock`` (reexecute only): the response to use where the recording kept only its hash
        (capture modes ``prompts_only`` and ``none``); production refuses such a call
        (``MISSING_PERSISTED_AGENT_OUTPUT``)."""
        return self._matching.answer(CallKind.MODEL, model_id, prompt, mock=mock)

    def tool_call(self, name: str, arguments: Any, *, mock: Any = NO_ANSWER_KEPT) -> Any:
        """The recorded result of this tool, when it is the run's next call, with these
        arguments (compared in canonical JSON); `ReplayDiverged` otherwise."""
        return self._matching.answer(CallKind.TOOL, name, arguments, mock=mock)

    def retrieve(self, query: str, *, mock: Any = NO_ANSWER_KEPT) -> list[dict[str, Any]]:
        """The recorded hits of this query, when it is the run's next call (each hit's ``uri``,
        ``score`` and ``explain``)."""
        hits: list[dict[str, Any]] = self._matching.answer(
            CallKind.RETRIEVAL, "retrieval", query, mock=mock
        )
        return hits

    def policy(self, bundle_hash: str) -> PolicyBundle:
        """The policy bundle the run named by this hash, as the ledger archived it: decisions
        reproduce under it whatever bundle is in force today."""
        return parse_bundle(self.policy_text(bundle_hash))

    def policy_text(self, bundle_hash: str) -> str:
        """`policy`'s bundle as the YAML the ledger archived (what a client out of process gets
        and parses with its own policy engine)."""
        held = self._opened.policy_bundle(bundle_hash)
        return self._matching.policy(bundle_hash, held)

    def identity(self) -> WorkloadIdentity:
        """The workload identity and attestation claims the run recorded, verified from the
        recorded evidence alone (`domain.workload_identity`): it holds after the issuer rotated
        its key away and after the agent's credential expired."""
        return self._matching.identity()

    def rng(self) -> DeterministicRNG:
        """The job's seeded RNG, the stream `RunRecorder.rng` gave the recorded run."""
        return self._rng

    def clock(self) -> TickingClock:
        """The job's deterministic clock, as `RunRecorder.clock` gave it to the recorded run."""
        return self._clock

    def final_output(self, value: Any) -> None:
        """The code's final answer, compared with the recorded one when the block ends
        (``RESULT_MISMATCH`` when it differs); without it, the answer is not compared."""
        self._final_output = value

    def close(self, broke_off: str | None = None) -> ReplayResult:
        """End the re-execution and record it: the code ended, or ``broke_off`` (what it did
        instead: `raised`) where it stood, which diverges there unless it stopped already."""
        self._matching.finish(self._final_output, broke_off)
        self.result = self._opened.close(self._matching.outcome)
        return self.result


def open_harness(
    source: RecordingSource,
    job_id: str,
    actor: Actor,
    *,
    mode: ReplayMode | str = ReplayMode.REEXECUTE,
    tenant: str = DEFAULT_TENANT,
) -> ReplayHarness:
    """A harness over the tenant's job, its request recorded; the caller ends it with
    `ReplayHarness.close` (`replay_harness` in process, the HTTP service across requests)."""
    chosen = parse_mode(mode)
    if chosen not in HARNESS_MODES:
        expected = [m.value for m in HARNESS_MODES]
        msg = f"the harness re-executes code: mode {chosen.value!r} is not one of {expected}"
        raise InvalidInput(msg)
    return ReplayHarness(source.open_recording(job_id, chosen, actor, tenant), chosen)


@contextmanager
def replay_harness(
    source: RecordingSource,
    job_id: str,
    actor: Actor,
    *,
    mode: ReplayMode | str = ReplayMode.REEXECUTE,
    tenant: str = DEFAULT_TENANT,
) -> Iterator[ReplayHarness]:
    """Re-execute the tenant's job: the block runs the agent's code against ``h``; the attempt
    is recorded when the block ends. ``mode``: ``reexecute`` (a sandbox: an answer the recording
    lacks may be given as a declared mock, which leaves the verdict non-authoritative) or
    ``production`` (strict: only what the run persisted; the access rules of production replay)."""
    harness = open_harness(source, job_id, actor, mode=mode, tenant=tenant)
    try:
        yield harness
    except BaseException as raised:
        # The attempt is recorded whatever the code raised: a divergence or refusal of the
        # harness's is already in its outcome; anything else is a divergence where the code
        # stopped (the recorded run went on, or ended, there).
        harness.close(raised_text(raised))
        raise
    harness.close()


def raised_text(raised: BaseException) -> str:
    """What code that raised did instead of ending, as a divergence shows it."""
    return f"raised {type(raised).__name__}: {raised}"


def reexecute(
    source: RecordingSource,
    job_id: str,
    code: AgentCode,
    actor: Actor,
    *,
    input: str | None = None,
    mode: ReplayMode | str = ReplayMode.REEXECUTE,
    tenant: str = DEFAULT_TENANT,
) -> ReplayResult:
    """Re-execute the tenant's job with ``code(h, input)`` (``input``: the recorded run's unless
    given), its return value compared with the recorded answer; the recorded attempt.

    Whatever the code raised is the attempt's outcome (a divergence where it stood), recorded
    and returned, not raised: what a command that runs agent code in CI reports. A refusal
    before the code runs (access, an unknown job, a recording that fails verification) is
    raised, as by `replay_harness`."""
    harness: ReplayHarness | None = None
    try:
        with replay_harness(source, job_id, actor, mode=mode, tenant=tenant) as harness:
            given = harness.recording.job_input if input is None else input
            harness.final_output(code(harness, given))
    except Exception:
        if harness is None or harness.result is None:  # refused before the code ran
            raise
    assert harness is not None and harness.result is not None
    return harness.result
