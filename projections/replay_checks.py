"""How a replay checked each recorded fact: the table its verdict stands on.

Every event of the job gets one row. A verdict is authoritative only when every recorded fact was
proven by the ledger: re-executed, or checked against something the ledger holds independently of
the run. Which checks are independent of the run decides the badge, so the line is drawn here:

- `Check.REEXECUTED`: the ledger computed the fact again and got the record. An iteration re-run
  by the Stage-0 runtime, a retrieval served again from the tenant's memory log at the position
  it names, a gate decided again under a policy bundle the ledger holds, a reducer re-folded.
- `Check.HASH_COMPARED`: one half of a pair the ledger holds or recomputes itself, the other the
  record's hash of it. An agent output the replay re-executed whose response the record kept
  only as its hash (capture mode), a policy reference naming a bundle the ledger holds.
- `Check.TAKEN_AS_RECORDED`: only the run vouches for it. A content and its hash that the
  emitter wrote side by side (a tool call's arguments, a tool's result, a model call's prompt and
  response, the hits of a retrieval from outside) prove that the emitter hashed what it wrote,
  nothing more: the ledger never saw the tool, the model or the outside index answer, and an
  emitter that swaps two results or invents a response hashes what it invented. Signatures prove
  who recorded a fact and that it has not changed since, not that it happened. So too a gate
  nothing can decide again, an emitter's error, a stage transition, and every fact of the
  emitter's the ledger has nothing to recompute from.

A fact taken as recorded or missing makes the verdict non-authoritative, in the ledger exactly as
from a bundle. A fact production replay would need and the job did not persist (a call or a
request no answer follows) is missing. Kept content that is not its recorded hash, a tool result
whose content contradicts its status, a gate its bundle decides otherwise: each diverges
(`RecordMismatch`). A replay that stopped leaves the facts it did not reach unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from domain.canonical import canonical_json
from domain.events import (
    EQUALITY_FIELDS,
    AgentOutput,
    GateDecision,
    InputReceived,
    IterationTrace,
    MissingArtifact,
    ModelCallEnvelope,
    PolicySnapshotRef,
    RetrievalRequest,
    RetrievalResponse,
    RouterDecision,
    RunEvent,
    SemRead,
    SemWrite,
    ToolCall,
    ToolResult,
    hash_of,
    hits_hash,
)
from domain.policy import Subject, parse_bundle
from domain.retrieval import names_a_memory
from domain.tool_boundary import contradicted_status


class Check(StrEnum):
    REEXECUTED = "reexecuted"
    """Re-executed by the replay and equal to the record, bit for bit in canonical form."""
    HASH_COMPARED = "hash_compared"
    """Content the ledger recomputed or holds itself, equal to the hash the record kept."""
    TAKEN_AS_RECORDED = "taken_as_recorded"
    """Only the run vouches for it (nothing to recompute it from in this capture mode, or a fact
    from outside the ledger): signed, not proven."""
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


class RecordMismatch(ValueError):
    """A recorded fact a check of the ledger's contradicts: ``field``, the recorded value and the
    one the check gives."""

    def __init__(self, field: str, recorded: Any, replayed: Any, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field, self.recorded, self.replayed = field, recorded, replayed


class HashMismatch(RecordMismatch):
    """Recorded content whose hash is not the one recorded beside it."""

    def __init__(self, field: str, recorded: str, computed: str) -> None:
        super().__init__(field, recorded, computed, "not the hash of the recorded content")


class GateMismatch(RecordMismatch):
    """A gate decision its recorded policy bundle decides otherwise."""

    def __init__(self, field: str, recorded: str, decided: str) -> None:
        super().__init__(field, recorded, decided, f"the recorded policy bundle decides {decided}")


_CONTENT: dict[type[RunEvent], tuple[tuple[str, str], ...]] = {
    ToolCall: (("arguments", "request_hash"),),
    ToolResult: (("result", "response_hash"),),
    ModelCallEnvelope: (("prompt", "request_hash"), ("response", "response_hash")),
}
_VOUCHED: dict[type[RunEvent], str] = {
    ToolCall: "a tool is never called again (seed 002): what it was asked is the emitter's",
    ToolResult: (
        "re-applied from its recorded result, never by calling the tool (seed 002): what the"
        " tool answered is the emitter's"
    ),
    ModelCallEnvelope: (
        "a model call is never made again offline (seed 003): its response is the emitter's"
    ),
}
"""Why each kind of call with kept content is the emitter's word, whatever its hashes say."""
_MOVING_VERSION: Final = re.compile(r"(.*[-:@/])?latest", re.IGNORECASE)
"""A model version that names whichever model is newest when called, not one model."""


def outside_fact(index: int, event: RunEvent, bundles: Mapping[str, str]) -> FactCheck:
    """The row of a fact from outside the Stage-0 runtime. ``bundles``: the policy bundles the
    ledger holds (YAML by hash), under which a gate decision is decided again.

    RecordMismatch when kept content does not hash to its recorded hash (`HashMismatch`), a
    tool result's content contradicts its status, or a gate's recorded bundle decides its
    subject otherwise (`GateMismatch`).
    """
    subject = _subject(index, event)
    if isinstance(event, RetrievalResponse):
        response_checked(index, event)
        detail = _outside_hits(event)
    elif isinstance(event, RetrievalRequest):
        detail = f"a retrieval from outside the ledger, not re-run: {request_checked(index, event)}"
    elif isinstance(event, GateDecision):
        return _gate_check(index, event, bundles)
    elif isinstance(event, PolicySnapshotRef):
        held = f"policy bundle {event.policy_bundle_hash} is held by the ledger"
        unchecked = [name for name in ("snapshot_id", "uri") if getattr(event, name) is not None]
        if not unchecked:
            return FactCheck(subject, Check.HASH_COMPARED, held, index)
        detail = f"{held}; {' and '.join(unchecked)} taken as recorded"
    elif type(event) in _CONTENT:
        detail = _content_check(index, event)
    else:
        detail = "a fact of the emitter's: nothing recomputes it"
    return FactCheck(subject, Check.TAKEN_AS_RECORDED, detail, index)


def _outside_hits(event: RetrievalResponse) -> str:
    detail = (
        "hits not served again: the emitter's; response_hash is the hash of its hits as the"
        " emitter gave them"
    )
    ledger_uri = next((hit.uri for hit in event.hits if names_a_memory(hit.uri)), None)
    if ledger_uri is None:
        return detail
    return f"{detail}; {ledger_uri} names a ledger memory, but no memory_position says where from"


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
        named = {"policy bundle": event.policy_bundle_hash, "subject": event.subject}
        unnamed = [name for name, value in named.items() if value is None]
        detail = f"a gate decision naming no {' and '.join(unnamed)}: nothing to decide it by"
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


def _content_check(index: int, event: RunEvent) -> str:
    """Why a call's kept content is the emitter's word, and what was checked of it: each kept
    content against its hash, a tool result's status against what its content says."""
    if isinstance(event, ToolResult):
        said = contradicted_status(event.status, event.result)
        if said is not None:
            why = f"its result says {said}"
            raise RecordMismatch(f"{_subject(index, event)} status", event.status, said, why)
    kept: list[tuple[str, str]] = []
    for content, hash_field in _CONTENT[type(event)]:
        value, recorded = getattr(event, content), getattr(event, hash_field)
        if value is None:
            continue
        computed = hash_of(value)
        if computed != recorded:
            raise HashMismatch(f"{_subject(index, event)} {hash_field}", recorded, computed)
        kept.append((hash_field, content))
    parts = [_VOUCHED[type(event)]]
    if isinstance(event, ModelCallEnvelope):
        loose = _unpinned(event)
        if loose:
            parts.append(f"not pinned: {', '.join(loose)}")
    if not kept:
        parts.append("only hashes kept: nothing to check them against")
    else:
        hashes, contents = (" and ".join(names) for names in zip(*kept, strict=True))
        one = len(kept) == 1
        parts.append(
            f"{hashes} {'is the hash' if one else 'are the hashes'} of its {contents} as the"
            f" emitter gave {'it' if one else 'them'}"
        )
    return "; ".join(parts)


def _unpinned(event: ModelCallEnvelope) -> list[str]:
    """What leaves a model call's answer free to differ if it were made again (seed 002: a trace
    pins model id and version, temperature and seed)."""
    loose: list[str] = []
    if event.model_version is None:
        loose.append("no model")
    elif _MOVING_VERSION.fullmatch(event.model_version):
        loose.append(f"model_version {event.model_version!r}")
    if event.temperature is None:
        loose.append("no temperature")
    elif event.temperature > 0:
        loose.append(f"temperature {event.temperature:g}")
    if event.seed is None:
        loose.append("no seed")
    return loose


def iteration_fact(index: int, event: RunEvent, iteration: int) -> FactCheck:
    """The row of an event of an iteration the replay re-ran, equal to the re-run's."""
    subject = _subject(index, event)
    if isinstance(event, AgentOutput) and event.status == "ok" and event.response is None:
        detail = "re-executed; the response, kept as its hash, matched it"
        return FactCheck(subject, Check.HASH_COMPARED, detail, index, iteration)
    detail = "the re-run equals the record"
    return FactCheck(subject, Check.REEXECUTED, detail, index, iteration)


_SUMMARISED: Final[dict[str, type[RunEvent]]] = {
    "router_decision": RouterDecision,
    "selected_agents": RouterDecision,
    "agent_outputs": AgentOutput,
    "sem_reads": SemRead,
    "sem_writes": SemWrite,
}
"""The trace fields that sum up events of their own: a trace field that diverged names the
trace and, of those events, the ones that differ from the re-run's."""


def diverged_iteration_facts(
    events: Sequence[tuple[int, RunEvent]],
    iteration: int,
    replayed: Sequence[RunEvent] | None,
    diverged: Sequence[str],
) -> list[FactCheck]:
    """The rows of an iteration in which ``diverged`` (fields, as the step log names them)
    differ, its events (``(index, event)``) checked against ``replayed``, the re-run's (None:
    there was no re-run). Only an event a diverged field names is diverged; one equal to the
    re-run's counterpart (the same type, the same occurrence) matched; one that differs and no
    divergence names was not reached: the replay stopped first."""
    rows: list[FactCheck] = []
    seen: dict[type[RunEvent], int] = {}
    for position, (index, event) in enumerate(events):
        kind = type(event)
        nth = seen[kind] = seen.get(kind, -1) + 1
        twins = [e for e in replayed or () if type(e) is kind]
        same = nth < len(twins) and canonical_json(twins[nth].payload()) == canonical_json(
            event.payload()
        )
        twin_kind = (
            None if replayed is None or position >= len(replayed) else type(replayed[position])
        )
        named = [f for f in diverged if _names(f, event, same=same, in_order=twin_kind is kind)]
        subject = _subject(index, event)
        if named:
            detail = (
                f"the re-run differs from the record: {', '.join(named)} (iteration {iteration})"
            )
            rows.append(FactCheck(subject, Check.DIVERGED, detail, index, iteration))
        elif same:
            rows.append(iteration_fact(index, event, iteration))
        else:
            detail = (
                "no re-run to compare it with"
                if replayed is None
                else f"the replay stopped at {diverged[0]} (iteration {iteration}) first"
            )
            rows.append(FactCheck(subject, Check.NOT_CHECKED, detail, index, iteration))
    return rows


def _names(field: str, event: RunEvent, *, same: bool, in_order: bool) -> bool:
    """Whether the diverged ``field`` (a trace field, ``events.<type>``, ``events.order``,
    ``job_input``, ``sem_read <key>`` or ``sem_write <key>``) is a fact of ``event``."""
    if field in EQUALITY_FIELDS or field == "iteration_trace":
        summed = _SUMMARISED.get(field)
        return isinstance(event, IterationTrace) or (summed is type(event) and not same)
    if field == "job_input":
        return isinstance(event, InputReceived)
    if field == "events.order":
        return not in_order
    if field.startswith("events."):
        return field == f"events.{event.EVENT_TYPE}" and not same
    sem, _, key = field.partition(" ")
    kinds: dict[str, type[RunEvent]] = {"sem_read": SemRead, "sem_write": SemWrite}
    return isinstance(event, kinds.get(sem, ())) and getattr(event, "key", None) == key


def unreached(index: int, event_type: str) -> FactCheck:
    """The row of a fact the replay stopped before it reached (maybe before it decoded it)."""
    return FactCheck(
        _subject_named(index, event_type), Check.NOT_CHECKED, "the replay stopped first", index
    )


def unpersisted(artifact: MissingArtifact, event: RunEvent) -> FactCheck:
    """The row of an output the job did not keep: missing when it never existed (a call or a
    request no answer follows, a policy bundle the ledger does not hold), taken as recorded when
    the capture mode or the emitter kept only its hash."""
    index = artifact.sequence_index
    assert index is not None
    what = f"{', '.join(artifact.missing)} not persisted: {artifact.reason}"
    absent = isinstance(event, ToolCall | RetrievalRequest) or "policy_bundle" in artifact.missing
    check = Check.MISSING if absent else Check.TAKEN_AS_RECORDED
    return FactCheck(_subject(index, event), check, what, index)


def _subject(index: int, event: RunEvent) -> str:
    return _subject_named(index, event.EVENT_TYPE)


def _subject_named(index: int, event_type: str) -> str:
    return f"event {index} {event_type}"


def tally(rows: list[FactCheck]) -> dict[str, int]:
    """How many facts each kind of check covered, every kind named (zero included)."""
    counts = dict.fromkeys((c.value for c in Check), 0)
    for row in rows:
        counts[row.check.value] += 1
    return counts
