"""The request bodies the service accepts, validated with pydantic before anything is done."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from domain.canonical import canonical_json
from domain.context_assembly import MAX_ENTRIES_LIMIT, MAX_QUERY_CHARS
from domain.events import EmittedEvent, JobId
from domain.governance import Motion, Vote
from domain.job import MAX_INPUT_CHARS, CaptureMode
from domain.memories import (
    MAX_EPISODE_CHARS,
    check_episode,
    check_fact_key,
    check_labels,
    check_reason,
)
from domain.replay_access import ReplayMode
from domain.sem import validate_value
from domain.snapshot import SnapshotKind

OneLine = Annotated[str, Field(min_length=1, max_length=500, pattern=r"^[^\r\n]*$")]
ClientEventId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]
SnapshotId = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def checked_by(check: Callable[[Any], object]) -> AfterValidator:
    """Refuse (422, naming the field) what the domain's own ``check`` refuses; keep it as sent."""

    def validate(value: Any) -> Any:
        check(value)
        return value

    return AfterValidator(validate)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="after")
    def _storable(self) -> Self:
        # Whatever is stored must have a canonical encoding: refuse here (422), not at the save.
        canonical_json(self.model_dump(mode="json"))
        return self


class _Batch(BaseModel):
    # Not a `Body`: each event's own validation already refuses what has no canonical encoding
    # (`RunEvent`), and an id is a plain pattern-checked string, so encoding every item and then
    # the whole batch once more would check the same bytes twice.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class BatchItem(_Batch):
    event_id: ClientEventId = Field(description="the emitter's id: a re-sent event is skipped")
    event: EmittedEvent


class EventBatch(_Batch):
    events: list[BatchItem] = Field(min_length=1)


class RunCompletion(Body):
    final_output: JsonValue


class Stage0Job(Body):
    input: str = Field(max_length=MAX_INPUT_CHARS)
    seed: StrictInt | StrictStr
    job_id: JobId | None = None
    user: str = Field(default="default", min_length=1, max_length=200)
    capture_mode: CaptureMode | None = Field(
        default=None,
        description="absent: prompts_only (seed 003), or full_io for a job that changes SEM"
        " (seed 000 section 12); the answer's capture_why says which",
    )
    snapshot_ids: dict[SnapshotKind, SnapshotId] = Field(default_factory=dict)


class MockReply(Body):
    text: str
    claims: list[dict[str, JsonValue]] = Field(default_factory=list)
    evidence: list[dict[str, JsonValue]] = Field(default_factory=list)


class ReplayAsk(Body):
    job_id: JobId
    mode: ReplayMode = ReplayMode.AUDIT
    force_continue: bool = False
    mocks: dict[str, MockReply] = Field(
        default_factory=dict, description="reexecute only: agent name -> the reply to give"
    )


class WhatIfChangesAsk(Body):
    """What a what-if re-runs the job under instead of what it declared; at least one."""

    router: SnapshotId | None = None
    selfrep: SnapshotId | None = None
    brainstate: SnapshotId | None = None
    privacy: SnapshotId | None = None
    governance: SnapshotId | None = None
    policy: SnapshotId | None = Field(default=None, description="a policy bundle's hash")


class WhatIfAsk(Body):
    job_id: JobId
    changes: WhatIfChangesAsk | None = Field(
        default=None, description="a what-if's changes; not with as_of"
    )
    as_of: StrictStr | None = Field(
        default=None,
        description="serve the job's memory reads as of N or checkpoint:N (a checkpoint) or"
        " position:N (a log position), instead of a what-if's changes",
    )
    compare_to: StrictStr | None = Field(
        default=None, description="with as_of: a second point, diffed with the first"
    )


MAX_BATCH_NAMES = 10_000
"""Jobs a batch names, and changes it expects, at most: a bigger batch is a window of the log."""


class ExpectedChangeAsk(Body):
    """A change a batch expects: the job's first change is on this field."""

    job_id: JobId
    field: OneLine


class WhatIfBatchAsk(Body):
    """The caller's jobs to re-run under ``changes``: those named in ``jobs``, else every job
    whose JobStarted is after notification ``since`` up to ``until`` (the head when omitted)."""

    changes: WhatIfChangesAsk
    since: StrictInt = Field(default=0, ge=0, description="after this notification")
    until: StrictInt | None = Field(default=None, ge=1, description="up to this notification")
    jobs: list[JobId] | None = Field(
        default=None, min_length=1, max_length=MAX_BATCH_NAMES, description="by id, in order"
    )
    expected: list[ExpectedChangeAsk] = Field(
        default_factory=list,
        max_length=MAX_BATCH_NAMES,
        description="changes that do not fail the batch: a job's first change, on this field",
    )

    @model_validator(mode="after")
    def _one_selection(self) -> Self:
        if self.until is not None and self.until <= self.since:
            msg = f"until ({self.until}) must be after since ({self.since}): the window is empty"
            raise ValueError(msg)
        if self.jobs is not None and (self.since or self.until is not None):
            raise ValueError("jobs names the jobs itself: it takes no since or until")
        if self.jobs is not None and len(set(self.jobs)) < len(self.jobs):
            raise ValueError("jobs names a job twice: expected each once")
        return self


class ForkAsk(Body):
    at: StrictInt = Field(ge=0, description="the iteration re-run from; those before it are kept")
    input: StrictStr | None = Field(
        default=None,
        max_length=MAX_INPUT_CHARS,
        description="iteration ``at``'s input in place of the recorded one",
    )
    changes: WhatIfChangesAsk | None = Field(
        default=None, description="the snapshots re-run under (policy: FORK_NOT_REDECIDABLE)"
    )


class AuditAsk(Body):
    since: StrictInt = Field(
        default=0, ge=0, description="audit only jobs whose first event is after this notification"
    )


class ForceContinueAsk(Body):
    reason: OneLine


class CouncilVote(Body):
    motion: Motion
    vote: Vote


STORE_WIDE = Field(
    default=False,
    description="halt for every tenant, not the caller's: store_operator role only",
)


class HaltAsk(Body):
    reason: OneLine
    store_wide: StrictBool = STORE_WIDE


class HaltClearAsk(Body):
    store_wide: StrictBool = STORE_WIDE


class SnapshotDeclaration(Body):
    kind: SnapshotKind
    payload: dict[str, JsonValue]
    schema_version: int = Field(default=1, ge=1, le=1_000_000)
    seed_namespace: str | None = None


Labels = Annotated[list[str], checked_by(check_labels), Field(default_factory=list)]
Origin = Annotated[JsonValue, Field(default=None, description="where the memory came from")]


class FactMemory(Body):
    kind: Literal["fact"]
    key: Annotated[str, checked_by(check_fact_key)] = Field(
        description="a SEM key: <scope>/<entity_type>/<entity_id>/<attribute>"
    )
    value: Annotated[JsonValue, checked_by(validate_value)]
    labels: Labels
    origin: Origin


class EpisodeMemory(Body):
    kind: Literal["episode"]
    text: Annotated[str, checked_by(check_episode)] = Field(max_length=MAX_EPISODE_CHARS)
    labels: Labels
    origin: Origin


MemoryWrite = Annotated[FactMemory | EpisodeMemory, Field(discriminator="kind")]


class ForgetAsk(Body):
    reason: Annotated[str, checked_by(check_reason)]


class AbandonAsk(ForgetAsk):
    """Why an open run is closed without a job (its emitter is gone)."""


class PolicyPut(Body):
    bundle_yaml: str = Field(description="the bundle's YAML, kept verbatim")


class ContextAsk(Body):
    query: str = Field(max_length=MAX_QUERY_CHARS)
    max_entries: StrictInt = Field(default=10, ge=1, le=MAX_ENTRIES_LIMIT)


class HandoffAsk(ContextAsk):
    to_agent: str
    from_agent: str | None = None
    note: str | None = None


class ReexecutionAsk(Body):
    job_id: JobId
    mode: Literal[ReplayMode.REEXECUTE, ReplayMode.PRODUCTION] = ReplayMode.REEXECUTE


_MOCK = "reexecute only: the answer to use where the recording kept none (absent: no mock)"


class ModelCallAsk(Body):
    kind: Literal["model"]
    model_id: str
    prompt: JsonValue
    mock: JsonValue = Field(default=None, description=_MOCK)


class ToolCallAsk(Body):
    kind: Literal["tool"]
    name: str
    arguments: JsonValue
    mock: JsonValue = Field(default=None, description=_MOCK)


class RetrieveAsk(Body):
    kind: Literal["retrieve"]
    query: str
    mock: JsonValue = Field(default=None, description=_MOCK)


class PolicyAsk(Body):
    kind: Literal["policy"]
    bundle_hash: str


class IdentityAsk(Body):
    kind: Literal["identity"]


class ClockAsk(Body):
    kind: Literal["clock"] = Field(description="the job's clock: its next instant")


class RandomDraw(Body):
    kind: Literal["rng.random"] = Field(
        description="a float in [0, 1) from the job's RNG, answered as its shortest round-trip"
        " text (canonical JSON would round it to 9 decimals)"
    )


class RandintDraw(Body):
    kind: Literal["rng.randint"]
    a: StrictInt
    b: StrictInt

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.a > self.b:
            msg = f"a ({self.a}) must not be greater than b ({self.b})"
            raise ValueError(msg)
        return self


class RandbitsDraw(Body):
    kind: Literal["rng.randbits"]
    k: StrictInt = Field(ge=1, le=63, description="bits: the integer stays a signed 64-bit one")


MAX_DRAWN_LENGTH = 100_000
"""The longest sequence a choice or shuffle is drawn for over HTTP."""


class ChoiceDraw(Body):
    kind: Literal["rng.choice"] = Field(
        description="the index the job's RNG chooses in a sequence of this length (the draw"
        " depends on the length only: the items stay with the caller)"
    )
    length: StrictInt = Field(ge=1, le=MAX_DRAWN_LENGTH)


class ShuffleDraw(Body):
    kind: Literal["rng.shuffle"] = Field(
        description="the order the job's RNG shuffles a sequence of this length into: answer[k]"
        " is the index of the item that goes to position k"
    )
    length: StrictInt = Field(ge=0, le=MAX_DRAWN_LENGTH)


HarnessCall = Annotated[
    ModelCallAsk
    | ToolCallAsk
    | RetrieveAsk
    | PolicyAsk
    | IdentityAsk
    | ClockAsk
    | RandomDraw
    | RandintDraw
    | RandbitsDraw
    | ChoiceDraw
    | ShuffleDraw,
    Field(discriminator="kind"),
]


class ReexecutionEnd(Body):
    final_output: JsonValue = Field(
        default=None, description="the code's final answer, compared with the recorded one"
    )
    raised: str | None = Field(
        default=None,
        max_length=2000,
        description="what the code raised instead of ending (e.g. KeyError: 'id'): a"
        " divergence where it stood",
    )
