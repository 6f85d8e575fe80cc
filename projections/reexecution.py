"""Re-execution: an outside agent's own code run again against its recording, call by call.

The agent's non-deterministic boundaries (model calls, tool calls, retrievals) are answered from
the run the ledger recorded, in the order the run made them. Each call the code makes now is
matched against the next recorded one: the same kind, the same name (model id, tool), and the
same request in canonical JSON (a prompt, a tool's arguments, a query), or, where the capture
mode kept only its hash, the same hash. A call the recording does not hold at that step (another
name, other arguments, one call too many, calls in another order) is a divergence there; so is a
recorded call the code never makes before it ends. The first divergence stops the re-execution
(`REPLAY_DIVERGENCE`, with the step, the field and both values).

What this checks is the agent's code: given the answers the run recorded, it asks for exactly
what the run asked for. It does not prove that the model or the tool answered so (only the run
vouches for that, as an audit replay's verdict says). An answer the recording did not keep is
refused in production (`MISSING_PERSISTED_AGENT_OUTPUT`); in a reexecute sandbox the caller may
supply one, which is used only as a declared mock and leaves the verdict non-authoritative unless
its hash is the recorded answer's.

Pure: the recording arrives as a job's decoded events; nothing here reads or writes anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NoReturn

from domain.canonical import canonical_json
from domain.capture import policy_bundles_named
from domain.errors import ErrorCode, MaceError
from domain.events import (
    JobCompleted,
    ModelCallEnvelope,
    RetrievalRequest,
    RetrievalResponse,
    RunEvent,
    ToolCall,
    ToolResult,
    WorkloadIdentity,
    hash_of,
)
from domain.replay_access import ReplayMode
from domain.workload_identity import key_fingerprint
from projections.replay import Divergence, ReplayOutcome, StepLog
from projections.replay_checks import Check, FactCheck

NO_ANSWER_KEPT: Any = object()
"""`RecordedCall.answer` of a call whose answer the recording keeps as a hash, or not at all."""
NOTHING = "nothing: the recording ends here"
"""What a call made past the recording's last one diverges from."""


class CallKind(StrEnum):
    MODEL = "model_call"
    TOOL = "tool_call"
    RETRIEVAL = "retrieve"


_REQUEST_FIELD = {CallKind.MODEL: "prompt", CallKind.TOOL: "arguments", CallKind.RETRIEVAL: "query"}
_ANSWER_FIELD = {CallKind.MODEL: "response", CallKind.TOOL: "result", CallKind.RETRIEVAL: "hits"}


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One boundary call of the recorded run, with its answer where the run holds one."""

    step: int
    """Its place among the run's boundary calls, from 0."""
    kind: CallKind
    name: str | None
    """The model id (None: the run did not record it), the tool's name; ``retrieval`` for a
    retrieval."""
    sequence_index: int
    """The event that made the call."""
    request: Any
    """The request as recorded (prompt, arguments, query); None when only its hash was kept."""
    request_hash: str | None
    answer: Any = NO_ANSWER_KEPT
    answer_hash: str | None = None
    answered_at: int | None = None
    """The event holding the answer (the call's own for a model call); None: none answers it."""

    def shown(self) -> dict[str, Any]:
        """The call as a divergence shows it."""
        return {"kind": self.kind.value, "name": self.name, _REQUEST_FIELD[self.kind]: self.request}


def recorded_calls(events: Sequence[tuple[int, RunEvent]]) -> list[RecordedCall]:
    """The run's model calls, tool calls and retrievals in stream order, each with its answer
    (a tool's result and a retrieval's response paired by id, as the tool boundary pairs them)."""
    results = {e.call_id: (i, e) for i, e in reversed(events) if isinstance(e, ToolResult)}
    responses = {
        e.request_id: (i, e) for i, e in reversed(events) if isinstance(e, RetrievalResponse)
    }
    calls: list[RecordedCall] = []
    for index, event in events:
        step = len(calls)
        if isinstance(event, ModelCallEnvelope):
            kept = NO_ANSWER_KEPT if event.response is None else event.response
            calls.append(
                RecordedCall(
                    step,
                    CallKind.MODEL,
                    event.model_id,
                    index,
                    event.prompt,
                    event.request_hash,
                    kept,
                    event.response_hash,
                    index,
                )
            )
        elif isinstance(event, ToolCall):
            at, result = results.get(event.call_id, (None, None))
            answer = NO_ANSWER_KEPT if result is None or result.result is None else result.result
            calls.append(
                RecordedCall(
                    step,
                    CallKind.TOOL,
                    event.tool,
                    index,
                    event.arguments,
                    event.request_hash,
                    answer,
                    None if result is None else result.response_hash,
                    at,
                )
            )
        elif isinstance(event, RetrievalRequest):
            at, response = responses.get(event.request_id, (None, None))
            hits = (
                NO_ANSWER_KEPT
                if response is None
                else [hit.model_dump(mode="json") for hit in response.hits]
            )
            calls.append(
                RecordedCall(
                    step,
                    CallKind.RETRIEVAL,
                    "retrieval",
                    index,
                    event.query,
                    event.request_hash,
                    hits,
                    None if response is None else response.response_hash,
                    at,
                )
            )
    return calls


class ReplayDiverged(MaceError):
    """The re-executed code left its recording: ``divergence`` says where and how."""

    def __init__(self, divergence: Divergence, message: str) -> None:
        super().__init__(divergence.code, message, divergence=divergence.as_json())
        self.divergence = divergence


@dataclass(frozen=True, slots=True)
class Recording:
    """What the harness re-executes against: a completed job's verified, decoded events."""

    job_id: str
    job_seed: str
    job_input: str
    capture_mode: str
    snapshot_ids: dict[str, str | None]
    events: Sequence[tuple[int, RunEvent]]
    """The job's events, its completion included, with their sequence indexes."""

    @property
    def completion(self) -> JobCompleted:
        return next(e for _, e in self.events if isinstance(e, JobCompleted))


@dataclass
class Reexecution:
    """The matching state of one re-execution: which recorded call comes next, what was checked.

    Every call goes through `answer`; `finish` closes it and `outcome` gives the replay outcome
    the ledger records (steps, divergences, the check of each call, the verdict's reasons)."""

    recording: Recording
    mode: ReplayMode
    calls: list[RecordedCall] = field(init=False)
    made: int = 0
    outcome: ReplayOutcome = field(init=False)
    finished: bool = False

    def __post_init__(self) -> None:
        self.calls = recorded_calls(self.recording.events)
        completion = self.recording.completion
        self.outcome = ReplayOutcome(self.recording.job_id, self.mode)
        self.outcome.capture_mode = self.recording.capture_mode
        self.outcome.snapshot_ids = dict(self.recording.snapshot_ids)
        self.outcome.unreconstructable = [
            m for m in completion.missing_artifacts if m.sequence_index is not None
        ]
        others = sorted(
            {
                e.EVENT_TYPE
                for _, e in self.recording.events
                if not isinstance(
                    e,
                    ModelCallEnvelope
                    | ToolCall
                    | ToolResult
                    | RetrievalRequest
                    | RetrievalResponse
                    | JobCompleted,
                )
            }
        )
        detail = (
            f"re-executed by the harness against job {self.recording.job_id}: seed"
            f" {self.recording.job_seed!r}, capture mode {self.recording.capture_mode},"
            f" {len(self.calls)} recorded boundary calls"
        )
        if others:
            detail += f"; not re-made by the harness, taken as recorded: {', '.join(others)}"
        self._step("1 load recording", "ok", detail)

    @property
    def stopped(self) -> bool:
        return self.outcome.error_code is not None

    def answer(self, kind: CallKind, name: str, request: Any, *, mock: Any = NO_ANSWER_KEPT) -> Any:
        """The recorded answer to this call, when it is the next recorded one (`ReplayDiverged`
        otherwise). ``mock``: the answer to use where the recording kept none (reexecute only)."""
        self._still_open()
        step = self.made
        where = f"{step + 1} {kind.value} {name}"
        made = {"kind": kind.value, "name": name, _REQUEST_FIELD[kind]: request}
        if step >= len(self.calls):
            self._diverge(step, where, "call", NOTHING, made, "a call past the recording's end")
        expected = self.calls[step]
        if (expected.kind, expected.name) != (kind, name):
            shown = {"kind": expected.kind.value, "name": expected.name}
            self._diverge(step, where, "call", shown, {"kind": kind.value, "name": name})
        self._same_request(step, where, expected, request)
        self.made += 1
        if expected.answer is not NO_ANSWER_KEPT:
            self._checked(expected, Check.REEXECUTED, "answered from the recording")
            self._step(where, "ok", f"matched event {expected.sequence_index}")
            return expected.answer
        return self._unkept(expected, where, mock)

    def _same_request(self, step: int, where: str, expected: RecordedCall, request: Any) -> None:
        field_name = f"{expected.kind.value}.{_REQUEST_FIELD[expected.kind]}"
        if expected.request is not None:
            if canonical_json(request) != canonical_json(expected.request):
                self._diverge(step, where, field_name, expected.request, request)
            return
        made = hash_of(request)
        if made != expected.request_hash:
            self._diverge(step, where, f"{field_name}_hash", expected.request_hash, made)

    def _unkept(self, expected: RecordedCall, where: str, mock: Any) -> Any:
        """A call the recording holds without its answer's content."""
        what = f"{_ANSWER_FIELD[expected.kind]} of event {expected.answered_at}"
        if expected.answered_at is None:
            what = f"an answer: nothing in the run answers event {expected.sequence_index}"
        elif expected.answer_hash is not None:
            what = f"the {what}: only its hash was kept (capture mode {self.outcome.capture_mode})"
        if self.mode is ReplayMode.PRODUCTION or mock is NO_ANSWER_KEPT:
            self._stop(
                ErrorCode.MISSING_PERSISTED_AGENT_OUTPUT,
                where,
                f"call {expected.step + 1} ({expected.kind.value} {expected.name}, event"
                f" {expected.sequence_index}): the recording does not hold {what}",
            )
        if expected.answer_hash is not None and hash_of(mock) == expected.answer_hash:
            detail = "answered by a declared mock whose hash is the recorded answer's"
            self._checked(expected, Check.HASH_COMPARED, detail)
            self._step(where, "ok", detail)
            return mock
        reason = f"call {expected.step + 1} answered by a declared mock, not by the recording"
        self.outcome.non_authoritative.append(reason)
        self._checked(expected, Check.TAKEN_AS_RECORDED, reason)
        self._step(where, "ok", reason)
        return mock

    def policy(self, bundle_hash: str, held: str | None) -> str:
        """The policy bundle the run named by ``bundle_hash`` (a policy reference's, a gate
        decision's), as the ledger holds it (``held``: its YAML, verified; None: not held). A hash
        the run never named is a divergence where the code asks for it; one the ledger does not
        hold is a missing snapshot, as it is to a production replay."""
        self._still_open()
        where = f"policy {bundle_hash}"
        named = sorted(policy_bundles_named(e for _, e in self.recording.events))
        if bundle_hash not in named:
            self._diverge(self.made, where, "policy_bundle_hash", named, bundle_hash)
        if held is None:
            message = f"policy bundle {bundle_hash}: the ledger holds no bundle with this hash"
            self._stop(ErrorCode.MISSING_SNAPSHOT, where, message)
        detail = "named by the run, held by the ledger (verified): the archived bundle"
        subject = f"policy bundle {bundle_hash}"
        self.outcome.checks.append(FactCheck(subject, Check.HASH_COMPARED, detail))
        self._step(where, "ok", detail)
        return held

    def identity(self) -> WorkloadIdentity:
        """The workload identity the run recorded, its statement's hash and its issuer's signature
        verified under the key the run recorded (never a live key or token service). A run that
        recorded none (one recorded before `WorkloadIdentity` existed, or whose emitter sent
        none) has nothing to answer with: refused, as an output it did not persist."""
        self._still_open()
        where = "identity"
        recorded = [(i, e) for i, e in self.recording.events if isinstance(e, WorkloadIdentity)]
        if not recorded:
            message = (
                "the run recorded no WorkloadIdentity (recorded before runs carried one, or its"
                " emitter sent none): there is no identity to answer with"
            )
            self._stop(ErrorCode.MISSING_PERSISTED_AGENT_OUTPUT, where, message)
        index, identity = recorded[0]
        problem = identity.problem()
        if problem is not None:
            self._diverge(self.made, where, "identity", identity.statement_hash, problem)
        detail = (
            f"statement hash and issuer signature verified under the recorded key"
            f" {key_fingerprint(identity.public_key)} ({identity.key_id}); that the key was the"
            " issuer's is the run's word"
        )
        subject = f"identity {identity.subject} (event {index})"
        self.outcome.checks.append(FactCheck(subject, Check.HASH_COMPARED, detail, index))
        self._step(where, "ok", detail)
        return identity

    def finish(self, final_output: Any = NO_ANSWER_KEPT, broke_off: str | None = None) -> None:
        """Close the re-execution: the code ended after the calls it made, or ``broke_off``
        there (what it did instead of ending: ``raised KeyError: 'id'``, abandoned, ...)."""
        if self.finished:
            return
        self.finished = True
        if not self.stopped:
            self._ended(final_output, broke_off)
        for call in self.calls[self.made :]:
            self.outcome.checks.append(
                FactCheck(
                    self._subject(call), Check.NOT_CHECKED, "not reached", call.sequence_index
                )
            )
        if not self.stopped:
            self._step("result", "ok", "the re-executed code made every recorded call, in order")

    def _ended(self, final_output: Any, broke_off: str | None) -> None:
        step = self.made
        left = self.calls[step] if step < len(self.calls) else None
        if broke_off is not None:
            expected = NOTHING if left is None else left.shown()
            self._diverge(step, "end", "agent", expected, broke_off, raise_it=False)
            return
        if left is not None:
            why = "the code ended without making it"
            self._diverge(step, "end", "call", left.shown(), None, why, raise_it=False)
            return
        self._step("end", "ok", f"all {len(self.calls)} recorded calls made, none more")
        recorded = self.recording.completion.final_output
        if final_output is NO_ANSWER_KEPT:
            self._step("final answer", "skipped", "the code handed no final output to compare")
            return
        if canonical_json(final_output) != canonical_json(recorded):
            divergence = Divergence(
                ErrorCode.RESULT_MISMATCH, None, "final_answer", recorded, final_output
            )
            self._record(divergence, "final answer", "job: final_answer differs from the record")
            return
        self._step("final answer", "ok", "the code's final output equals the recorded one")

    def _still_open(self) -> None:
        if self.finished:
            msg = "the re-execution is closed: no call can be answered after the harness block"
            raise MaceError(ErrorCode.REPLAY_DIVERGENCE, msg)
        if self.stopped:
            first = self.outcome.divergences[0] if self.outcome.divergences else None
            message = f"the re-execution stopped already: {self.outcome.error_message}"
            if first is None:
                raise MaceError(self.outcome.error_code or ErrorCode.REPLAY_DIVERGENCE, message)
            raise ReplayDiverged(first, message)

    def _diverge(
        self,
        step: int,
        where: str,
        field_name: str,
        recorded: Any,
        replayed: Any,
        why: str = "",
        *,
        raise_it: bool = True,
    ) -> None:
        divergence = Divergence(ErrorCode.REPLAY_DIVERGENCE, step, field_name, recorded, replayed)
        message = f"call {step + 1} (iteration {step}): {field_name} differs from the record"
        if why:
            message += f" ({why})"
        self._record(divergence, where, message)
        if step < len(self.calls):
            call = self.calls[step]
            self.outcome.checks.append(
                FactCheck(self._subject(call), Check.DIVERGED, message, call.sequence_index)
            )
            self.made = step + 1
        if raise_it:
            diff = canonical_json(divergence.as_json()).decode()
            raise ReplayDiverged(divergence, f"{message}; {diff}")

    def _record(self, divergence: Divergence, where: str, message: str) -> None:
        self.outcome.divergences.append(divergence)
        self.outcome.error_code = divergence.code
        self.outcome.error_message = message
        self._step(
            f"compare {divergence.field} ({where})", "failed", f"{divergence.code}: {message}"
        )

    def _stop(self, code: ErrorCode, where: str, message: str) -> NoReturn:
        self.outcome.error_code = code
        self.outcome.error_message = message
        self._step(where, "failed", f"{code.value}: {message}")
        raise MaceError(code, message)

    def _checked(self, call: RecordedCall, check: Check, answered: str) -> None:
        detail = f"the request re-made by the code equals the record; {answered}"
        self.outcome.checks.append(
            FactCheck(self._subject(call), check, detail, call.sequence_index)
        )

    @staticmethod
    def _subject(call: RecordedCall) -> str:
        return f"call {call.step + 1} {call.kind.value} {call.name} (event {call.sequence_index})"

    def _step(self, name: str, outcome: str, detail: str) -> None:
        self.outcome.steps.append(StepLog(name, outcome, detail))
