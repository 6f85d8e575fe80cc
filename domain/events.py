"""Run Event Schema v1: every fact a job records, from the Stage-0 runtime or an outside emitter.

One versioned pydantic model per event type (seed 003's types, the seed 002 trace fields on model
calls, and the ReflectiveLog entries of seeds 000 and 004). A job's stream is ``RunStarted``,
then events, then ``RunCompleted`` from the emitter; the ledger adds ``JobCompleted`` (its own
verdict on replayability) and the seal. Every value must have a canonical encoding, so NaN, huge
integers and the like are refused when an event is built, with the path of the offending field.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal, Self, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationInfo,
    model_validator,
)

from domain.canonical import Written, digest, write
from domain.context_assembly import ContextRequest
from domain.errors import InvalidInput
from domain.job import MAX_INPUT_CHARS, CaptureMode, validate_job_id
from domain.snapshot import SNAPSHOT_ID_PATTERN, SnapshotKind
from domain.tool_boundary import contradicted_status
from domain.workload_identity import STATEMENT_FIELDS, identity_problem

RECORDED = "recorded"
"""Validation context of a fact decoded from a job's stored, verified record (`decode_recorded`)."""
READ_BACK = "read_back"
"""Validation context of content read back from the ledger's own canonical, verified bytes (a
run's held events): held to every rule of an event sent now but the canonical encoding check,
which those bytes already passed."""

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Iteration = Annotated[int, Field(ge=0, le=1_000_000)]
JobId = Annotated[str, AfterValidator(validate_job_id)]


_WRITTEN_PAYLOAD: Final = "_written_payload"
"""Where a `RunEvent` keeps its payload's canonical bytes, with the id of the event they are of."""


class RunEvent(BaseModel):
    """Base of every Run Event Schema v1 model; ``type`` names the model."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schema_version: Literal[1] = 1
    EVENT_TYPE: ClassVar[str]

    @model_validator(mode="after")
    def _canonical(self, info: ValidationInfo) -> RunEvent:
        # A recorded fact was canonical JSON when it was signed and stored: checked then. A new
        # one is checked by writing its payload, and the bytes are kept for its record.
        context = info.context or {}
        if not (context.get(RECORDED) or context.get(READ_BACK)):
            self._keep(self._written())
        return self

    def _written(self) -> Written:
        """The payload written canonically, from the Python values themselves (a value with no
        canonical form is refused, naming its path, never dumped to JSON's likeness first);
        what `payload` says, as the same bytes."""
        data = self.model_dump(mode="python")
        data.pop("type")
        return write(data)

    def _keep(self, written: Written) -> None:
        # Beside the fields, never one of them; a copy (`model_copy`) is another object.
        object.__setattr__(self, _WRITTEN_PAYLOAD, (id(self), written))

    def written_payload(self) -> Written:
        """`payload`'s canonical bytes, as written when the event was made (`Job.record` stores
        them): written now for one decoded from its record or copied with changes."""
        kept = self.__dict__.get(_WRITTEN_PAYLOAD)
        if kept is not None and kept[0] == id(self):
            return cast(Written, kept[1])
        written = self._written()
        self._keep(written)
        return written

    def as_read_back(self, payload: dict[str, Any]) -> Self:
        """This event as replay decodes it from its record, whose payload reads back as
        ``payload`` (the value of `written_payload`'s bytes): the event itself when those bytes
        were written from its values as they stand (`Written.exact`: nothing rounded, so its
        record decodes to the same event); else decoded from ``payload``, as replay decodes it
        (a float rounded to nine decimals, -0.0 written 0.0)."""
        if self.written_payload().exact:
            return self
        decoded = decode_recorded(self.EVENT_TYPE, payload)
        assert isinstance(decoded, type(self))
        return decoded

    def payload(self) -> dict[str, Any]:
        """What the ledger stores for this event (its type is stored beside it)."""
        data = self.model_dump(mode="json")
        data.pop("type")
        return data

    def trace_entry(self) -> dict[str, Any]:
        """This event as an entry of an iteration trace: its facts, without the framing."""
        return {k: v for k, v in self.payload().items() if k not in {"schema_version", "iteration"}}


def hash_of(value: Any) -> str:
    """``request_hash``/``response_hash``: SHA-256 of the canonical JSON of the content."""
    return digest(value)


class _HashedContent(RunEvent):
    """A call whose request and response may be kept or reduced to their hashes (capture modes).

    A hash may be left out when its content is given; it is then computed (so once built, the
    event always has both hashes). A hash given with its content must match it.
    """

    CONTENT_FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("prompt", "request_hash"),
        ("response", "response_hash"),
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_hashes(cls, data: Any, info: ValidationInfo) -> Any:
        # A recorded fact is taken as stored: replay checks its hashes and says where they differ.
        if not isinstance(data, dict) or (info.context or {}).get(RECORDED):
            return data
        data = dict(data)
        for content, hash_field in cls.CONTENT_FIELDS:
            value, given = data.get(content), data.get(hash_field)
            if value is None:
                continue  # a hash alone is kept; neither is refused once the fields are valid
            computed = hash_of(value)
            if given is None:
                data[hash_field] = computed
            elif given != computed:
                msg = f"{hash_field} does not match the sha256 of the canonical JSON of {content}"
                raise InvalidInput(msg)
        return data

    @model_validator(mode="after")
    def _hash_or_content(self) -> _HashedContent:
        for content, hash_field in self.CONTENT_FIELDS:
            if getattr(self, content) is None and getattr(self, hash_field) is None:
                msg = f"{hash_field} is required when {content} is not given"
                raise InvalidInput(msg)
        return self


# Framing: the emitter's start and end of a run.


class RunStarted(RunEvent):
    type: Literal["RunStarted"] = "RunStarted"
    EVENT_TYPE = "RunStarted"
    job_id: JobId | None = None
    seed: StrictInt | StrictStr
    input: str = Field(max_length=MAX_INPUT_CHARS)
    snapshot_ids: dict[SnapshotKind, str] = Field(default_factory=dict)
    capture_mode: CaptureMode = CaptureMode.PROMPTS_ONLY

    @model_validator(mode="after")
    def _check(self) -> RunStarted:
        if isinstance(self.seed, bool) or self.seed == "":
            msg = "seed must be a non-empty string or an integer"
            raise InvalidInput(msg)
        for kind, snapshot_id in self.snapshot_ids.items():
            if not SNAPSHOT_ID_PATTERN.fullmatch(snapshot_id):
                msg = f"snapshot_ids.{kind.value}: expected 64 lowercase hex characters"
                raise InvalidInput(msg)
        return self

    @property
    def seed_text(self) -> str:
        return str(self.seed)

    @property
    def declared_ids(self) -> dict[str, str]:
        """The declared snapshots by kind name, as a job records them."""
        return {kind.value: snapshot_id for kind, snapshot_id in self.snapshot_ids.items()}


class RunCompleted(RunEvent):
    type: Literal["RunCompleted"] = "RunCompleted"
    EVENT_TYPE = "RunCompleted"
    final_output: JsonValue


# The ReflectiveLog of a Stage-0 job (seed 000 section 3, seed 004 section 5).


class InputReceived(RunEvent):
    """The percept an iteration starts from."""

    type: Literal["InputReceived"] = "InputReceived"
    EVENT_TYPE = "InputReceived"
    iteration: Iteration
    text: str
    user: Name


class RouterDecision(RunEvent):
    type: Literal["RouterDecision"] = "RouterDecision"
    EVENT_TYPE = "RouterDecision"
    iteration: Iteration
    rule_id: str | None
    agent: Name
    why: Name
    fallback: Literal["F3"] | None = None


class SemRead(RunEvent):
    type: Literal["SemRead"] = "SemRead"
    EVENT_TYPE = "SemRead"
    iteration: Iteration
    key: str
    exists: bool
    value: JsonValue = None
    last_updated: str | None = None


class SemWrite(RunEvent):
    type: Literal["SemWrite"] = "SemWrite"
    EVENT_TYPE = "SemWrite"
    iteration: Iteration
    key: str
    value: JsonValue
    status: Literal["written", "failed"]
    last_updated: str | None = None
    reason: str | None = None


class AgentOutput(_HashedContent):
    """One agent's answer; prompt and response are kept as the capture mode says.

    ``declined``: the agent had no way to answer (the request goes on to ``generic_agent``, F3);
    ``failed``: it raised, ``error`` says what (F4).
    """

    type: Literal["AgentOutput"] = "AgentOutput"
    EVENT_TYPE = "AgentOutput"
    iteration: Iteration
    agent: Name
    status: Literal["ok", "declined", "failed"]
    request_hash: Sha256 | None = None
    response_hash: Sha256 | None = None
    prompt: JsonValue = None
    response: JsonValue = None
    error: str | None = None


class IterationTrace(RunEvent):
    """One iteration's entry in the ReflectiveLog: the fields replay must reproduce exactly."""

    type: Literal["IterationTrace"] = "IterationTrace"
    EVENT_TYPE = "IterationTrace"
    iteration: Iteration
    router_decision: dict[str, JsonValue]
    selected_agents: list[str]
    agent_outputs: list[dict[str, JsonValue]]
    sem_reads: list[dict[str, JsonValue]]
    sem_writes: list[dict[str, JsonValue]]
    final_output: JsonValue
    council_votes: list[dict[str, JsonValue]] = Field(default_factory=list)
    claims: list[dict[str, JsonValue]] = Field(default_factory=list)
    evidence_items: list[dict[str, JsonValue]] = Field(default_factory=list)
    brainstate_before: dict[str, JsonValue]
    brainstate_after: dict[str, JsonValue]

    @model_validator(mode="after")
    def _outputs_as_agent_outputs(self, info: ValidationInfo) -> IterationTrace:
        # Each entry repeats an AgentOutput: a field it does not have is content that capture
        # modes and redaction would not know to take out.
        if (info.context or {}).get(RECORDED):
            return self
        for position, entry in enumerate(self.agent_outputs):
            unknown = sorted(entry.keys() - TRACE_OUTPUT_FIELDS)
            if unknown:
                allowed = ", ".join(sorted(TRACE_OUTPUT_FIELDS))
                msg = (
                    f"agent_outputs[{position}]: no field {unknown[0]!r} (an output has {allowed})"
                )
                raise InvalidInput(msg)
        return self


TRACE_OUTPUT_FIELDS: Final = frozenset(AgentOutput.model_fields) - {
    "type",
    "iteration",
    "schema_version",
}
"""What an iteration trace's entry of an agent output may hold: the output's own fields."""


EQUALITY_FIELDS: tuple[str, ...] = (
    "router_decision",
    "selected_agents",
    "agent_outputs",
    "sem_reads",
    "sem_writes",
    "final_output",
    "council_votes",
    "claims",
    "evidence_items",
    "brainstate_before",
    "brainstate_after",
)
"""Seed 004 section 5: the fields replay must match exactly, in the order they are compared."""


# Seed 003's types, with the seed 002 trace fields on model calls.


class StageTransition(RunEvent):
    type: Literal["StageTransition"] = "StageTransition"
    EVENT_TYPE = "StageTransition"
    from_stage: str | None = None
    to_stage: Name
    reason: str | None = None


class PolicySnapshotRef(RunEvent):
    type: Literal["PolicySnapshotRef"] = "PolicySnapshotRef"
    EVENT_TYPE = "PolicySnapshotRef"
    policy_bundle_hash: Sha256
    snapshot_id: Sha256 | None = None
    uri: str | None = None


class RetrievalRequest(_HashedContent):
    """A retrieval. ``memory_position``: served from the ledger's own tenant memories as the log
    stood at that position (`domain.retrieval`), which replay serves again; without it, from an
    outside system, and taken as recorded. ``request_hash`` is the hash of ``query``."""

    type: Literal["RetrievalRequest"] = "RetrievalRequest"
    EVENT_TYPE = "RetrievalRequest"
    CONTENT_FIELDS = (("query", "request_hash"),)
    request_id: Name
    query: str
    retrieval_config_hash: Sha256 | None = None
    request_hash: Sha256 | None = None
    memory_position: Annotated[int, Field(ge=1, le=2**62)] | None = None
    max_entries: Annotated[int, Field(ge=1, le=100)] = 10

    @model_validator(mode="after")
    def _servable(self, info: ValidationInfo) -> RetrievalRequest:
        # A recorded request was checked when it was recorded (a redacted copy has no query).
        if self.memory_position is not None and not (info.context or {}).get(RECORDED):
            ContextRequest(self.query, self.max_entries)  # the ledger could not have served it
        return self


class RetrievalHit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    uri: Name
    score: float
    explain: dict[str, JsonValue] = Field(default_factory=dict)


def hits_hash(hits: list[dict[str, Any]]) -> str:
    """A retrieval's ``response_hash``: the hash of its hits, each with every field written."""
    return hash_of([RetrievalHit.model_validate(h).model_dump(mode="json") for h in hits])


class RetrievalResponse(RunEvent):
    """A retrieval's answer; ``response_hash`` is the hash of its hits (`hits_hash`), computed
    when left out and refused when it differs."""

    type: Literal["RetrievalResponse"] = "RetrievalResponse"
    EVENT_TYPE = "RetrievalResponse"
    request_id: Name
    hits: list[RetrievalHit]
    retrieved_context_hashes: list[Sha256] = Field(default_factory=list)
    response_hash: Sha256 | None = None

    @model_validator(mode="before")
    @classmethod
    def _hash_of_hits(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or (info.context or {}).get(RECORDED):
            return data
        hits = data.get("hits")
        if not isinstance(hits, list) or not all(isinstance(h, dict | RetrievalHit) for h in hits):
            return data  # the field's own validation says what is wrong
        try:
            computed = hits_hash(
                [h.model_dump(mode="json") if isinstance(h, RetrievalHit) else h for h in hits]
            )
        except ValueError:
            return data
        given = data.get("response_hash")
        if given is not None and given != computed:
            msg = "response_hash does not match the sha256 of the canonical JSON of hits"
            raise InvalidInput(msg)
        return {**data, "response_hash": computed}


class ToolCall(_HashedContent):
    """A tool called with ``arguments``; ``request_hash`` is the sha256 of their canonical JSON
    (computed when left out, refused when it differs). Without arguments only the hash is kept."""

    CONTENT_FIELDS = (("arguments", "request_hash"),)
    type: Literal["ToolCall"] = "ToolCall"
    EVENT_TYPE = "ToolCall"
    call_id: Name
    tool: Name
    tool_schema_hash: Sha256
    arguments: JsonValue = None
    request_hash: Sha256 | None = None


class ToolResult(_HashedContent):
    """A tool's response; without ``result`` only its hash is kept and it cannot be re-applied.
    Its ``status`` is the one its result gives, if that says one (`contradicted_status`)."""

    CONTENT_FIELDS = (("result", "response_hash"),)
    type: Literal["ToolResult"] = "ToolResult"
    EVENT_TYPE = "ToolResult"
    call_id: Name
    status: Literal["ok", "error"]
    result: JsonValue = None
    response_hash: Sha256 | None = None

    @model_validator(mode="after")
    def _status_as_said(self, info: ValidationInfo) -> ToolResult:
        # A recorded fact was taken in before this rule, maybe: replay diverges on it instead.
        if not (info.context or {}).get(RECORDED):
            said = contradicted_status(self.status, self.result)
            if said is not None:
                msg = (
                    f"status {self.status!r} contradicts its result, which says {said!r}:"
                    " a result's status is the one its content gives"
                )
                raise InvalidInput(msg)
        return self


class PatchApply(RunEvent):
    type: Literal["PatchApply"] = "PatchApply"
    EVENT_TYPE = "PatchApply"
    patch_id: Name
    target: Name
    patch_hash: Sha256
    applied: bool


class GateSubject(BaseModel):
    """What a gate decided about, as a policy bundle's rules see it (seed 001): one memory (its
    kind and labels) and the caller asking for it. With it, replay re-evaluates the gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_kind: Literal["fact", "episode"]
    labels: list[Name] = Field(default_factory=list)
    caller_id: Name
    caller_roles: list[Name] = Field(default_factory=list)


class GateDecision(RunEvent):
    """A gate's decision; under ``policy_bundle_hash`` about ``subject``, replay decides it again
    by that bundle (the recorded one, never the bundle in force now) and compares."""

    type: Literal["GateDecision"] = "GateDecision"
    EVENT_TYPE = "GateDecision"
    gate: Name
    decision: Literal["allow", "deny", "escalate", "redact"]
    reason: str | None = None
    policy_bundle_hash: Sha256 | None = None
    subject: GateSubject | None = None


class ErrorEvent(RunEvent):
    type: Literal["ErrorEvent"] = "ErrorEvent"
    EVENT_TYPE = "ErrorEvent"
    code: Name
    message: str
    step: str | None = None


class BranchMerged(RunEvent):
    type: Literal["BranchMerged"] = "BranchMerged"
    EVENT_TYPE = "BranchMerged"
    branch: Name
    into: Name
    merge_hash: Sha256 | None = None


class CapsuleExported(RunEvent):
    type: Literal["CapsuleExported"] = "CapsuleExported"
    EVENT_TYPE = "CapsuleExported"
    capsule_uri: Name
    digest: Sha256


class CapsuleImported(RunEvent):
    type: Literal["CapsuleImported"] = "CapsuleImported"
    EVENT_TYPE = "CapsuleImported"
    capsule_uri: Name
    digest: Sha256


class ModelCallEnvelope(_HashedContent):
    """One model call with everything seed 002 says a replay trace must pin."""

    type: Literal["ModelCallEnvelope"] = "ModelCallEnvelope"
    EVENT_TYPE = "ModelCallEnvelope"
    call_id: Name
    model_id: Name | None
    """None: the emitter did not record which model answered (listed as missing, so the job is
    not replayable), as a trace without content may not."""
    model_version: Name | None
    prompt_bundle_hash: Sha256
    tool_schema_hash: Sha256 | None = None
    temperature: float | None = Field(ge=0)
    """None: the emitter did not record it (listed as missing, so the job is not replayable)."""
    seed: StrictInt | StrictStr | None = None
    retrieved_context_hashes: list[Sha256] = Field(default_factory=list)
    request_hash: Sha256 | None = None
    response_hash: Sha256 | None = None
    prompt: JsonValue = None
    response: JsonValue = None


class WorkloadIdentity(RunEvent):
    """The workload identity and attestation the run acted under (seed 002: "return the recorded
    workload identity claims and attestation status for the run being replayed"), with the
    evidence that verifies them later without the identity provider: the issuer's Ed25519
    signature over the statement (`domain.workload_identity.statement_bytes`), the issuer's
    public key as it stood when the run ran, and the statement's hash. The credential the agent
    presented is a secret and is never stored; ``credential_hash`` pins it.

    New in Run Event Schema v1 (``schema_version`` 1); a run recorded before it has none, which
    the re-execution harness says (`identity` refuses: nothing was recorded to answer with)."""

    type: Literal["WorkloadIdentity"] = "WorkloadIdentity"
    EVENT_TYPE = "WorkloadIdentity"
    subject: Name
    """The workload's identity, e.g. a SPIFFE ID."""
    issuer: Name
    claims: dict[str, JsonValue] = Field(default_factory=dict)
    attestation: dict[str, JsonValue] = Field(default_factory=dict)
    """The attestation status and evidence the issuer vouched for (platform, measurements)."""
    key_id: Name
    public_key: str = Field(pattern=r"^[A-Za-z0-9+/]{43}=$")
    """The issuer's Ed25519 public key (32 bytes, base64), as recorded with the run."""
    signature: str = Field(pattern=r"^[A-Za-z0-9+/]{86}==$")
    """The issuer's Ed25519 signature over the statement (64 bytes, base64)."""
    statement_hash: Sha256
    credential_hash: Sha256 | None = None

    @model_validator(mode="after")
    def _verified(self, info: ValidationInfo) -> WorkloadIdentity:
        # A false identity is refused where it is taken in; a recorded one is verified again by
        # the harness, which says where it fails.
        if not (info.context or {}).get(RECORDED):
            problem = self.problem()
            if problem is not None:
                raise InvalidInput(f"WorkloadIdentity: {problem}")
        return self

    def statement(self) -> dict[str, Any]:
        """What the issuer signed."""
        return {name: getattr(self, name) for name in STATEMENT_FIELDS}

    def problem(self) -> str | None:
        """What does not verify in this identity (`identity_problem`), or None."""
        return identity_problem(
            self.statement(), self.public_key, self.signature, self.statement_hash
        )


# The ledger's own verdict, recorded after the emitter's last event and before the seal.


class MissingArtifact(BaseModel):
    """A step whose content was not stored, so production replay cannot reconstruct it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sequence_index: int | None
    event_type: str
    step: str
    missing: list[str]
    reason: str


class MaterialisedState(BaseModel):
    """A reducer's state as the run saw it: the value and the digest of its canonical bytes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    digest: Sha256
    state: dict[str, JsonValue]

    @classmethod
    def of(cls, state: dict[str, Any]) -> MaterialisedState:
        # Made, not validated: a reducer's state is JSON by construction, and its digest writes
        # it canonically, which refuses anything that is not (as the verdict's own bytes do).
        return cls.model_construct(digest=digest(state), state=state)


class JobCompleted(RunEvent):
    type: Literal["JobCompleted"] = "JobCompleted"
    EVENT_TYPE = "JobCompleted"
    final_output: JsonValue
    replayable: bool
    missing_artifacts: list[MissingArtifact]
    selfrep: MaterialisedState | None
    brainstate: MaterialisedState | None


ITERATION_EVENTS = (InputReceived, RouterDecision, SemRead, SemWrite, AgentOutput, IterationTrace)
"""The events an iteration of the Stage-0 runtime emits; each carries its iteration."""

EMITTED_TYPES: tuple[type[RunEvent], ...] = (
    InputReceived,
    RouterDecision,
    SemRead,
    SemWrite,
    AgentOutput,
    IterationTrace,
    StageTransition,
    PolicySnapshotRef,
    RetrievalRequest,
    RetrievalResponse,
    ToolCall,
    ToolResult,
    PatchApply,
    GateDecision,
    ErrorEvent,
    BranchMerged,
    CapsuleExported,
    CapsuleImported,
    ModelCallEnvelope,
    WorkloadIdentity,
)
"""What an emitter may send between ``RunStarted`` and ``RunCompleted``."""

_RECORDED: tuple[type[RunEvent], ...] = (RunStarted, RunCompleted, JobCompleted, *EMITTED_TYPES)
ALL_TYPES: dict[str, type[RunEvent]] = {cls.EVENT_TYPE: cls for cls in _RECORDED}

EmittedEvent = Annotated[
    InputReceived
    | RouterDecision
    | SemRead
    | SemWrite
    | AgentOutput
    | IterationTrace
    | StageTransition
    | PolicySnapshotRef
    | RetrievalRequest
    | RetrievalResponse
    | ToolCall
    | ToolResult
    | PatchApply
    | GateDecision
    | ErrorEvent
    | BranchMerged
    | CapsuleExported
    | CapsuleImported
    | ModelCallEnvelope
    | WorkloadIdentity,
    Field(discriminator="type"),
]
IngestLine = Annotated[
    RunStarted | RunCompleted | EmittedEvent,
    Field(discriminator="type"),
]
INGEST_LINE: TypeAdapter[Any] = TypeAdapter(IngestLine)


def decode_recorded(event_type: str, payload: dict[str, Any]) -> RunEvent:
    """The Run Event a job's recorded ``(event_type, payload)`` holds."""
    cls = ALL_TYPES.get(event_type)
    if cls is None:
        msg = f"unknown run event type {event_type!r}"
        raise InvalidInput(msg)
    return cls.model_validate({**payload, "type": event_type}, context={RECORDED: True})


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one line of a run file (``mace schema``)."""
    schema = INGEST_LINE.json_schema()
    schema["$id"] = "https://mace-ledger.dev/schemas/run-event-v1.json"
    schema["title"] = "MACE Run Event Schema v1"
    return schema
