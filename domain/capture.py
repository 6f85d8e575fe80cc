"""Capture modes (seed 003) and the replayability check at job end (seed 000 section 9).

``full_io`` keeps a model call's prompt and response, ``prompts_only`` the prompt and the
response's hash, ``none`` the hashes only. Hashes are always kept, so a later replay can still
prove what was said even where it cannot say it again. A job is replayable only if production
replay would find everything it needs: every declared snapshot in the ledger, the content of
every model and tool output, an answer for every tool call and retrieval request
(`domain.tool_boundary`), and every policy bundle a gate decision or policy reference names.

Unless the caller chooses a mode, a Stage-0 job keeps ``prompts_only`` (seed 003), except a job
that changes SEM: seed 000 section 12 persists external outputs by default for any job that
changes SEM or governance, so that it replays in production (`chosen_capture`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from enum import StrEnum
from typing import Any, TypeVar, cast

from domain.events import (
    ITERATION_EVENTS,
    AgentOutput,
    GateDecision,
    IterationTrace,
    MissingArtifact,
    ModelCallEnvelope,
    PolicySnapshotRef,
    RetrievalRequest,
    RetrievalResponse,
    RunEvent,
    SemWrite,
    ToolCall,
    ToolResult,
)
from domain.job import CaptureMode, Job
from domain.snapshot import SnapshotKind
from domain.stage0.config import GovernanceConfig
from domain.tool_boundary import tool_steps, unanswered

E = TypeVar("E", bound=RunEvent)

_KEEPS: dict[CaptureMode, frozenset[str]] = {
    CaptureMode.FULL_IO: frozenset({"prompt", "response"}),
    CaptureMode.PROMPTS_ONLY: frozenset({"prompt"}),
    CaptureMode.NONE: frozenset(),
}


def apply_capture(event: E, mode: CaptureMode) -> E:
    """The event as the capture mode lets it be stored (model I/O only; hashes always kept).

    An iteration trace repeats each agent output: its entries lose what the outputs lose, as
    the runtime's own trace, built from the outputs as stored, does; else a run sent in with
    ``prompts_only`` could keep its responses in the trace."""
    dropped = {"prompt", "response"} - _KEEPS[mode]
    if isinstance(event, IterationTrace):
        # The runtime's own traces hold nothing to drop: they are kept as they are, uncopied.
        if not any(entry.get(k) is not None for entry in event.agent_outputs for k in dropped):
            return event
        entries = [
            {k: (None if k in dropped else v) for k, v in entry.items()}
            for entry in event.agent_outputs
        ]
        return cast(E, event.model_copy(update={"agent_outputs": entries}))
    # Nothing to drop: the event itself, as made (with the canonical bytes it keeps).
    if not isinstance(event, AgentOutput | ModelCallEnvelope) or all(
        getattr(event, field) is None for field in dropped
    ):
        return event
    return cast(E, event.model_copy(update=dict.fromkeys(dropped)))


def record_captured(job: Job, events: Iterable[RunEvent]) -> list[RunEvent]:
    """Record ``events`` on ``job``, each as its capture mode keeps it (`apply_capture`), its
    payload as the bytes written when it was made; returns them as the job's records of them
    decode (the events themselves, but those written otherwise than they hold:
    `RunEvent.as_read_back`), for the job's completion to fold and log."""
    capture = CaptureMode(job.capture_mode)
    taken = []
    for event in events:
        captured = apply_capture(event, capture)
        job.record(captured.EVENT_TYPE, captured.written_payload())
        taken.append(captured.as_read_back(job.facts[-1].payload))
    return taken


class CaptureWhy(StrEnum):
    """Why a job kept what it kept: said with every job run, never stored (the mode is)."""

    ASKED = "asked"
    """The caller chose the mode."""
    DEFAULT = "default"
    """``prompts_only``, the default of seed 003."""
    CHANGES_SEM = "changes_sem"
    """``full_io``, the default of seed 000 section 12 for a job that changes SEM."""


CAPTURE_WHY_TEXT: dict[CaptureWhy, str] = {
    CaptureWhy.ASKED: "as asked",
    CaptureWhy.DEFAULT: "the default, seed 003",
    CaptureWhy.CHANGES_SEM: (
        "the default for a job that changes SEM, seed 000 section 12: its external outputs are kept"
    ),
}


def chosen_capture(
    asked: CaptureMode | None, events: Iterable[RunEvent]
) -> tuple[CaptureMode, CaptureWhy]:
    """The mode a job is recorded in: ``asked``, else by what its events (run in ``full_io``)
    did: ``full_io`` when one wrote SEM, ``prompts_only`` otherwise.

    Decided from the job's own events alone, which its seed, input, snapshots and the SEM it
    read determine: the same job gets the same mode, and records it. A Stage-0 job's events
    never change governance (councils append to their own streams), so SEM is the whole test.
    """
    if asked is not None:
        return asked, CaptureWhy.ASKED
    if any(isinstance(e, SemWrite) and e.status == "written" for e in events):
        return CaptureMode.FULL_IO, CaptureWhy.CHANGES_SEM
    return CaptureMode.PROMPTS_ONLY, CaptureWhy.DEFAULT


def _not_pinned(index: int, event: ModelCallEnvelope, step: str) -> list[MissingArtifact]:
    """What a model call's emitter did not record of what pins it: which model, its sampling."""
    missing = []
    if event.model_id is None:
        unnamed = "the emitter recorded no model id: which model answered is not known"
        missing.append(_never_recorded(index, event, step, "model_id", unnamed))
    if event.temperature is None:
        unpinned = "the emitter recorded no temperature: the call's sampling is not pinned"
        missing.append(_never_recorded(index, event, step, "temperature", unpinned))
    return missing


def _step(event: RunEvent) -> str | None:
    if isinstance(event, AgentOutput):
        return f"iteration {event.iteration} agent {event.agent}"
    if isinstance(event, ModelCallEnvelope):
        model = " ".join(filter(None, (event.model_id, event.model_version)))
        return f"model call {event.call_id} ({model or 'no model recorded'})"
    if isinstance(event, ToolResult):
        return f"tool result {event.call_id}"
    return None


def _missing_content(event: RunEvent) -> list[str]:
    if isinstance(event, AgentOutput) and event.status != "ok":
        # A declined or failed agent gave no response: only its prompt could be missing.
        return [] if event.prompt is not None else ["prompt"]
    if isinstance(event, AgentOutput | ModelCallEnvelope):
        return [name for name in ("prompt", "response") if getattr(event, name) is None]
    if isinstance(event, ToolResult) and event.status == "ok" and event.result is None:
        return ["result"]
    return []


def policy_bundles_named(events: Iterable[RunEvent]) -> set[str]:
    """The policy bundle hashes a run's gate decisions and policy references name."""
    return {
        e.policy_bundle_hash
        for e in events
        if isinstance(e, PolicySnapshotRef | GateDecision) and e.policy_bundle_hash is not None
    }


def _never_recorded(
    index: int, event: RunEvent, step: str, what: str, reason: str
) -> MissingArtifact:
    """An artifact the run names and nothing in the ledger holds."""
    return MissingArtifact(
        sequence_index=index,
        event_type=event.EVENT_TYPE,
        step=step,
        missing=[what],
        reason=reason,
    )


def _unanswered(event: RunEvent) -> tuple[str, str, str]:
    """A call or request no answer follows: its step, what is missing, the answer's type."""
    if isinstance(event, ToolCall):
        return f"tool call {event.call_id} ({event.tool})", "result", ToolResult.EVENT_TYPE
    assert isinstance(event, RetrievalRequest)
    return f"retrieval {event.request_id}", "response", RetrievalResponse.EVENT_TYPE


def missing_artifacts(
    snapshot_ids: dict[str, str],
    stored_snapshots: Set[str],
    events: Iterable[tuple[int, RunEvent]],
    mode: CaptureMode,
    held_bundles: Set[str] = frozenset(),
    governance: GovernanceConfig | None = None,
) -> list[MissingArtifact]:
    """What production replay of this job would lack, in stream order, snapshots first.

    ``held_bundles``: the hashes of the policy bundles the ledger holds for the job's tenant.
    ``governance``: the job's governance snapshot, whose iteration cap every replay of the job
    obeys: a job that ran more iterations than it allows can never be replayed.
    """
    missing: list[MissingArtifact] = []
    for kind in SnapshotKind:
        snapshot_id = snapshot_ids.get(kind.value)
        if snapshot_id is None:
            reason = f"the job declares no {kind.value} snapshot"
        elif snapshot_id not in stored_snapshots:
            reason = f"snapshot {snapshot_id} is not in the ledger"
        else:
            continue
        missing.append(
            MissingArtifact(
                sequence_index=None,
                event_type="JobStarted",
                step=f"{kind.value} snapshot",
                missing=["snapshot"],
                reason=reason,
            )
        )
    indexed = list(events)
    if governance is not None:
        missing += _beyond_iteration_cap(snapshot_ids, indexed, governance)
    unanswered_at = {indexed[p][0] for p in unanswered(tool_steps(e for _, e in indexed))}
    for index, event in indexed:
        if (
            isinstance(event, PolicySnapshotRef | GateDecision)
            and event.policy_bundle_hash is not None
            and event.policy_bundle_hash not in held_bundles
        ):
            bundle = f"policy bundle {event.policy_bundle_hash}"
            unheld = "the ledger holds no policy bundle with this hash"
            missing.append(_never_recorded(index, event, bundle, "policy_bundle", unheld))
            continue
        if index in unanswered_at:
            asked, what, answer = _unanswered(event)
            why = f"no {answer} in the run answers it"
            missing.append(_never_recorded(index, event, asked, what, why))
            continue
        step = _step(event)
        if isinstance(event, ModelCallEnvelope):
            missing += _not_pinned(index, event, str(step))
        absent = _missing_content(event)
        if not absent or step is None:
            continue
        dropped = [name for name in absent if name not in _KEEPS[mode]]
        if isinstance(event, ToolResult) or not dropped:
            reason = f"the emitter recorded the hash of {' and '.join(absent)} only"
        else:
            reason = f"capture mode {mode.value} stores the hash of {' and '.join(dropped)} only"
        missing.append(
            MissingArtifact(
                sequence_index=index,
                event_type=event.EVENT_TYPE,
                step=step,
                missing=absent,
                reason=reason,
            )
        )
    return missing


def _beyond_iteration_cap(
    snapshot_ids: dict[str, str],
    events: list[tuple[int, RunEvent]],
    governance: GovernanceConfig,
) -> list[MissingArtifact]:
    """The iteration cap as replay applies it (one iteration per distinct ``iteration``)."""
    ran = len({e.iteration for _, e in events if isinstance(e, ITERATION_EVENTS)})
    cap = governance.replay_max_iterations
    if ran <= cap:
        return []
    snapshot = snapshot_ids.get(SnapshotKind.GOVERNANCE.value)
    reason = (
        f"the job ran {ran} iterations and its governance snapshot {snapshot} lets a replay run"
        f" {cap}: no replay reaches iteration {cap}"
    )
    return [
        MissingArtifact(
            sequence_index=None,
            event_type=IterationTrace.EVENT_TYPE,
            step="replay iteration cap",
            missing=["iterations"],
            reason=reason,
        )
    ]


def snapshots_found_at_completion(
    snapshot_ids: Mapping[str, str], missing: Iterable[Mapping[str, Any]]
) -> dict[str, str]:
    """The declared snapshots (by kind) that were in the ledger when the job completed: those its
    completion's missing artifacts (as recorded, JSON) do not list. Snapshots are never removed,
    so one of these that is gone now was deleted."""
    absent = {m["step"] for m in missing if m["event_type"] == "JobStarted"}
    return {kind: sid for kind, sid in snapshot_ids.items() if f"{kind} snapshot" not in absent}
