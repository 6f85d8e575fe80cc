"""A run's completion folds the events it parsed (issue 29 point 1: fold and parse once per job),
and that fold is the one replay makes from the stored bytes.

`domain.capture.record_captured` records a run's events and hands the completion each event
itself where its payload was written exactly as it holds, else its record's decode
(`RunEvent.as_read_back`). Property: for any run, awkward floats (rounded to nine decimals,
-0.0, tiny and huge), any Unicode, integers to the edges of signed 64 bits, the verdict
(`complete_job`: BrainState, SelfRepresentation, missing artifacts) and the log made from those
events are byte for byte the ones made from the job's records signed, stored, verified and
decoded, as replay reads them.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from domain.canonical import INT64_MAX, INT64_MIN, canonical_json
from domain.capture import record_captured
from domain.events import (
    AgentOutput,
    InputReceived,
    IterationTrace,
    JobCompleted,
    ModelCallEnvelope,
    RouterDecision,
    RunEvent,
    SemRead,
    SemWrite,
    ToolCall,
    ToolResult,
    decode_recorded,
)
from domain.job import CaptureMode, Job
from domain.snapshot import SnapshotKind
from domain.stage0.config import (
    DEFAULT_CONFIGS,
    BrainStateConfig,
    GovernanceConfig,
    SelfRepConfig,
)
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.mapper import SignedMapper
from infrastructure.storage.records.signed_record import verify_record
from projections.reflective_log import RanAsRecorded, ReflectiveLog, complete_job

MAPPER = SignedMapper(Keyring({"k1": b"\x11" * 32}, "k1"))
SELFREP = DEFAULT_CONFIGS[SnapshotKind.SELFREP]
BRAINSTATE = DEFAULT_CONFIGS[SnapshotKind.BRAINSTATE]
GOVERNANCE = DEFAULT_CONFIGS[SnapshotKind.GOVERNANCE]
assert isinstance(SELFREP, SelfRepConfig)
assert isinstance(BRAINSTATE, BrainStateConfig)
assert isinstance(GOVERNANCE, GovernanceConfig)
CONFIGS = (SELFREP, BRAINSTATE, GOVERNANCE)
HASH = "a" * 64

floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 0.1234567891234, 2.0000000005, 1e-10, 5e-324, 1e300, -1.5e-9]),
)
integers = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX]))
texts = st.text(max_size=20)
names = st.text(min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | integers | floats | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
contents = json_values.filter(lambda value: value is not None)
"""A call's content, given (a hash alone is another case: `test_run_events`)."""
iterations = st.integers(0, 3)


@st.composite
def valid(draw: st.DrawFn, /, model: type[RunEvent], **fields: st.SearchStrategy[Any]) -> RunEvent:
    """A ``model`` event the schema takes, its fields drawn from ``fields``."""
    drawn = {name: draw(strategy) for name, strategy in fields.items()}
    try:
        return model(**drawn)
    except ValueError:  # e.g. a tool result whose content says another status
        reject()


def _agent_output() -> st.SearchStrategy[RunEvent]:
    return valid(
        AgentOutput,
        iteration=iterations,
        agent=names,
        status=st.sampled_from(["ok", "declined", "failed"]),
        prompt=contents,
        response=contents,
    )


objects = st.dictionaries(texts, json_values, max_size=3)
traces = valid(
    IterationTrace,
    iteration=iterations,
    router_decision=objects,
    selected_agents=st.lists(names, max_size=2),
    agent_outputs=st.lists(
        st.fixed_dictionaries({"agent": names, "response": contents}), max_size=2
    ),
    sem_reads=st.lists(objects, max_size=2),
    sem_writes=st.lists(objects, max_size=2),
    final_output=json_values,
    brainstate_before=objects,
    brainstate_after=objects,
)
run_events: st.SearchStrategy[RunEvent] = st.one_of(
    traces,
    valid(InputReceived, iteration=iterations, text=texts, user=names),
    valid(RouterDecision, iteration=iterations, rule_id=st.none() | texts, agent=names, why=names),
    valid(SemRead, iteration=iterations, key=texts, exists=st.booleans(), value=json_values),
    valid(
        SemWrite,
        iteration=iterations,
        key=texts,
        value=json_values,
        status=st.sampled_from(["written", "failed"]),
    ),
    _agent_output(),
    valid(
        ModelCallEnvelope,
        call_id=names,
        model_id=st.none() | names,
        model_version=st.none() | names,
        prompt_bundle_hash=st.just(HASH),
        temperature=st.none() | st.floats(min_value=0, allow_nan=False, allow_infinity=False),
        prompt=contents,
        response=contents,
    ),
    valid(ToolCall, call_id=names, tool=names, tool_schema_hash=st.just(HASH), arguments=contents),
    valid(ToolResult, call_id=names, status=st.just("ok"), result=contents),
)


def read_back(job: Job) -> Job:
    """The job as replay reads it: each of its events signed and stored, verified, decoded
    (its facts but the last straight from their records), folded; the same job, field for
    field, as its records each decoded as an event make."""
    events = job.collect_events()
    stored = [MAPPER.to_stored_event(event) for event in events]
    verified = [verify_record(MAPPER.keyring, record) for record in stored]
    folded = Job.folded(MAPPER.decode_stream(verified))
    assert isinstance(folded, Job)
    each = Job.folded(MAPPER.decode(record) for record in verified)
    assert isinstance(each, Job)
    assert vars(folded) == vars(each)
    return folded


def verdict_bytes(completion: JobCompleted) -> bytes:
    return canonical_json(completion.payload())


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(run_events, max_size=8),
    mode=st.sampled_from(list(CaptureMode)),
    final_output=json_values,
)
def test_the_parsed_events_fold_and_log_as_the_stored_records_decode(
    events: list[RunEvent], mode: CaptureMode, final_output: Any
) -> None:
    job = Job.start("fold-once", "seed", "input", {}, mode)
    taken = record_captured(job, events)
    completion = complete_job(job, final_output, set(), *CONFIGS, ran=RanAsRecorded(taken))
    job.record(JobCompleted.EVENT_TYPE, completion.written_payload())
    completion = completion.as_read_back(job.facts[-1].payload)  # as `JobService.commit`
    log = ReflectiveLog.of(job, [*taken, completion]).as_json()

    stored = read_back(job)
    # The verdict replay makes again from the stored facts is the one recorded, written as
    # the ledger writes them, and the completion the log holds is the stored one.
    replayed = complete_job(stored, final_output, set(), *CONFIGS)
    assert verdict_bytes(completion) == verdict_bytes(replayed)
    assert completion == decode_recorded(JobCompleted.EVENT_TYPE, stored.facts[-1].payload)
    # As the values stand, not canonically written (which would round what was not rounded).
    assert as_they_stand(log) == as_they_stand(ReflectiveLog.of(stored).as_json())


def as_they_stand(value: Any) -> bytes:
    """``value`` as JSON, every float as it is (-0.0, all its decimals)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
