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
