"""How a replay checked each recorded fact: the table its verdict stands on.

Every event of the job gets one row. An iteration's events are re-executed by the Stage-0 runtime
and compared; a response kept only as its hash (capture mode) is compared by that hash. Facts
from outside the ledger (model calls, tool results, retrievals, gates, the rest) cannot be
re-run: their content is checked against their recorded hashes where it was kept, and they are
otherwise taken as recorded. A fact production replay would need and the job did not persist is
missing. A replay that stopped leaves the facts it did not reach unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.events import (
    AgentOutput,
    GateDecision,
    MissingArtifact,
    ModelCallEnvelope,
    PolicySnapshotRef,
    RetrievalRequest,
    RetrievalResponse,
    RunEvent,
    ToolCall,
    ToolResult,
    hash_of,
    hits_hash,
)
from domain.policy import Subject, parse_bundle


class Check(StrEnum):
    REEXECUTED = "reexecuted"
    """Re-executed by the replay and equal to the record, bit for bit in canonical form."""
    HASH_COMPARED = "hash_compared"
    """Content the replay computed or was given, equal to the hash the record kept."""
    TAKEN_AS_RECORDED = "taken_as_recorded"
    """Nothing to recompute it from in this capture mode or outside the ledger: signed, not
    reproduced."""
    MISSING = "missing"
    """Production replay needs it and the job did not persist it."""
    DIVERGED = "diverged"
    """Re-executed, and different from the record."""
    NOT_CHECKED = "not_checked"
    """The replay stopped before it reached this fact."""


LABELS: dict[Check, str] = {
    Check.REEXECUTED: "re-executed and matched",
    Check.HASH_COMPARED: "compared by hash",
    Check.TAKEN_AS_RECORDED: "taken as recorded",
    Check.MISSING: "missing",
    Check.DIVERGED: "diverged",
    Check.NOT_CHECKED: "not checked",
}


@dataclass(frozen=True, slots=True)
class FactCheck:
    subject: str
    """The event (``event 3 AgentOutput``) or derived fact (``final answer``) checked."""
    check: Check
    detail: str
    sequence_index: int | None = None
    iteration: int | None = None
    """The iteration an event of the Stage-0 runtime belongs to (not part of the report)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "sequence_index": self.sequence_index,
            "subject": self.subject,
            "check": self.check.value,
            "detail": self.detail,
        }


class HashMismatch(ValueError):
    """Recorded content whose hash is not the one recorded beside it."""

    def __init__(self, field: str, recorded: str, computed: str) -> None:
        super().__init__(f"{field} is not the hash of the recorded content")
        self.field, self.recorded, self.computed = field, recorded, computed


_CONTENT: dict[type[RunEvent], tuple[tuple[str, str], ...]] = {
    ToolCall: (("arguments", "request_hash"),),
    ToolResult: (("result", "response_hash"),),
    ModelCallEnvelope: (("prompt", "request_hash"), ("response", "response_hash")),
}


class GateMismatch(ValueError):
    """A gate decision its recorded policy bundle decides otherwise."""

    def __init__(self, field: str, recorded: str, decided: str) -> None:
        super().__init__(f"{field}: the recorded policy bundle decides {decided}")
        self.field, self.recorded, self.decided = field, recorded, decided


def outside_fact(index: int, event: RunEvent, bundles: Mapping[str, str]) -> FactCheck:
    """The row of a fact from outside the Stage-0 runtime. ``bundles``: the policy bundles the
    ledger holds (YAML by hash), under which a gate decision is decided again.

    HashMismatch when kept content does not hash to its recorded hash, GateMismatch when a gate's
    recorded bundle decides its subject otherwise.
    """
    if isinstance(event, RetrievalResponse):
        response_checked(index, event)
        detail = "a retrieval from outside the ledger: response_hash is the hash of its hits"
    elif isinstance(event, RetrievalRequest):
        detail = f"a retrieval from outside the ledger, not re-run: {request_checked(index, event)}"
    elif isinstance(event, GateDecision):
        return _gate_check(index, event, bundles)
    elif isinstance(event, PolicySnapshotRef):
        unchecked = [name for name in ("snapshot_id", "uri") if getattr(event, name) is not None]
        detail = f"policy bundle {event.policy_bundle_hash} is held by the ledger" + (
            f"; {' and '.join(unchecked)} taken as recorded" if unchecked else ""
        )
        return FactCheck(_subject(index, event), Check.HASH_COMPARED, detail, index)
    elif type(event) in _CONTENT:
        return _content_check(index, event)
    else:
        detail = "a fact of the emitter's: nothing recomputes it"
    return FactCheck(_subject(index, event), Check.TAKEN_AS_RECORDED, detail, index)


def response_checked(index: int, event: RetrievalResponse) -> None:
    """HashMismatch when a retrieval's ``response_hash`` is not the hash of its hits."""
    computed = hits_hash([hit.model_dump(mode="json") for hit in event.hits])
    if computed != event.response_hash:
        subject = f"{_subject(index, event)} response_hash"
        raise HashMismatch(subject, str(event.response_hash), computed)


def request_checked(index: int, event: RetrievalRequest) -> str:
    """What was checked of a retrieval's ``request_hash`` against its query: HashMismatch when it
    is not the query's hash. A redacted copy keeps the hash beside an emptied query (ingest
    refuses any other hash that is not its query's): that hash is taken as recorded."""
    computed = hash_of(event.query)
    if computed == event.request_hash:
        return "request_hash is the hash of its query"
    if event.query == "":
        return "its query is not kept (redacted), request_hash taken as recorded"
    raise HashMismatch(f"{_subject(index, event)} request_hash", str(event.request_hash), computed)


def _gate_check(index: int, event: GateDecision, bundles: Mapping[str, str]) -> FactCheck:
    subject = _subject(index, event)
    if event.policy_bundle_hash is None or event.subject is None:
        detail = "a gate decision naming no policy bundle and subject: nothing to decide it by"
        return FactCheck(subject, Check.TAKEN_AS_RECORDED, detail, index)
    bundle = parse_bundle(bundles[event.policy_bundle_hash])
    rule = bundle.decide(
        Subject(
            memory_kind=event.subject.memory_kind,
            labels=frozenset(event.subject.labels),
            caller_id=event.subject.caller_id,
            caller_roles=frozenset(event.subject.caller_roles),
        )
    )
    decided = "allow" if rule is None else rule.action.value
    if decided != event.decision:
        raise GateMismatch(f"{subject} decision", event.decision, decided)
    why = "no rule matches" if rule is None else f"rule {rule.rule_id}"
    detail = f"decided again under policy bundle {event.policy_bundle_hash}: {decided} ({why})"
    return FactCheck(subject, Check.REEXECUTED, detail, index)


def _content_check(index: int, event: RunEvent) -> FactCheck:
    kept: list[str] = []
    for content, hash_field in _CONTENT[type(event)]:
        value, recorded = getattr(event, content), getattr(event, hash_field)
        if value is None:
            continue
        computed = hash_of(value)
        if computed != recorded:
            raise HashMismatch(f"{_subject(index, event)} {hash_field}", recorded, computed)
        kept.append(f"{hash_field} is the hash of its {content}")
    if not kept:
        what = "only hashes kept: nothing to check them against"
        return FactCheck(_subject(index, event), Check.TAKEN_AS_RECORDED, what, index)
    applied = "re-applied from its recorded result; " if isinstance(event, ToolResult) else ""
    detail = applied + "; ".join(kept) + " (no live call)"
    return FactCheck(_subject(index, event), Check.HASH_COMPARED, detail, index)


def iteration_fact(index: int, event: RunEvent, iteration: int, matched: bool) -> FactCheck:
    """The row of an event of an iteration the replay re-ran."""
    subject = _subject(index, event)
    if not matched:
        detail = "the re-run differs from the record"
        return FactCheck(subject, Check.DIVERGED, detail, index, iteration)
    if isinstance(event, AgentOutput) and event.status == "ok" and event.response is None:
        detail = "re-executed; the response, kept as its hash, matched it"
        return FactCheck(subject, Check.HASH_COMPARED, detail, index, iteration)
    detail = "the re-run equals the record"
    return FactCheck(subject, Check.REEXECUTED, detail, index, iteration)


def unreached(index: int, event: RunEvent, diverged: int | None) -> FactCheck:
    """The row of a fact the replay stopped at (in ``diverged``, the iteration that diverged) or
    before."""
    if diverged is not None:
        return iteration_fact(index, event, diverged, matched=False)
    return FactCheck(_subject(index, event), Check.NOT_CHECKED, "the replay stopped first", index)


def unpersisted(artifact: MissingArtifact, event: RunEvent) -> FactCheck:
    """The row of an output the job did not keep: missing when it never existed (a call no result
    answers, a policy bundle the ledger does not hold), taken as recorded when the capture mode or
    the emitter kept only its hash."""
    index = artifact.sequence_index
    assert index is not None
    what = f"{', '.join(artifact.missing)} not persisted: {artifact.reason}"
    absent = isinstance(event, ToolCall) or "policy_bundle" in artifact.missing
    check = Check.MISSING if absent else Check.TAKEN_AS_RECORDED
    return FactCheck(_subject(index, event), check, what, index)


def _subject(index: int, event: RunEvent) -> str:
    return f"event {index} {event.EVENT_TYPE}"


def tally(rows: list[FactCheck]) -> dict[str, int]:
    """How many facts each kind of check covered, every kind named (zero included)."""
    counts = dict.fromkeys((c.value for c in Check), 0)
    for row in rows:
        counts[row.check.value] += 1
    return counts
