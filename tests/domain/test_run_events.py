"""Run Event Schema v1 (seed 003), the seed 002 trace fields, capture modes and run files.

Every event is a versioned, closed pydantic model whose values have a canonical encoding; model
and tool I/O is kept or reduced to its hashes as the capture mode says; a job is replayable only
if nothing production replay needs is missing; a run file is validated line by line, and an
error names the line and the field.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson
import pytest
from pydantic import ValidationError
from support.stage0_support import SEED_003_TYPES
from support.workload_identities import signed_identity

from domain.capture import apply_capture, missing_artifacts
from domain.events import (
    ALL_TYPES,
    EMITTED_TYPES,
    AgentOutput,
    BranchMerged,
    CapsuleExported,
    CapsuleImported,
    ErrorEvent,
    GateDecision,
    InputReceived,
    IterationTrace,
    JobCompleted,
    MaterialisedState,
    MissingArtifact,
    ModelCallEnvelope,
    PatchApply,
    PolicySnapshotRef,
    RetrievalHit,
    RetrievalRequest,
    RetrievalResponse,
    RouterDecision,
    RunCompleted,
    RunEvent,
    RunStarted,
    SemRead,
    SemWrite,
    StageTransition,
    ToolCall,
    ToolResult,
    decode_recorded,
    hash_of,
    json_schema,
)
from domain.job import CaptureMode
from domain.run_file import LINE_TYPES, ParsedRun, RunFileError, parse_run
from domain.snapshot import SnapshotKind

H = hash_of("x")
OTHER = hash_of("y")
SEED_002_FIELDS = (
    "model_id",
    "model_version",
    "prompt_bundle_hash",
    "tool_schema_hash",
    "temperature",
    "seed",
    "retrieved_context_hashes",
    "request_hash",
    "response_hash",
)
PROMPT = {"messages": [{"role": "user", "content": "hi"}]}
RESPONSE = {"text": "hello", "score": 0.5}


def model_call(**fields: Any) -> ModelCallEnvelope:
    data = {
        "call_id": "m1",
        "model_id": "gpt-x",
        "model_version": "2024-01-01",
        "prompt_bundle_hash": H,
        "tool_schema_hash": OTHER,
        "temperature": 0.2,
        "seed": 7,
        "retrieved_context_hashes": [H, OTHER],
        "prompt": PROMPT,
        "response": RESPONSE,
    }
    return ModelCallEnvelope.model_validate(data | fields)


def agent_output(**fields: Any) -> AgentOutput:
    data = {
        "iteration": 0,
        "agent": "math_agent",
        "status": "ok",
        "prompt": PROMPT,
        "response": RESPONSE,
    }
    return AgentOutput.model_validate(data | fields)


SAMPLES: list[RunEvent] = [
    RunStarted(
        job_id="job-1",
        seed="s1",
        input="2 + 3",
        snapshot_ids={SnapshotKind.ROUTER: H},
        capture_mode=CaptureMode.FULL_IO,
    ),
    RunCompleted(final_output={"answer": 5}),
    InputReceived(iteration=0, text="2 + 3", user="alice"),
    RouterDecision(iteration=0, rule_id=None, agent="generic_agent", why="x", fallback="F3"),
    SemRead(iteration=0, key="a/b/c/d", exists=True, value=[1, "x"], last_updated="2024"),
    SemWrite(iteration=0, key="a/b/c/d", value="v", status="failed", reason="denied"),
    agent_output(),
    IterationTrace(
        iteration=0,
        router_decision={"rule_id": "R1"},
        selected_agents=["math_agent"],
        agent_outputs=[],
        sem_reads=[],
        sem_writes=[],
        final_output="2 + 3 = 5",
        brainstate_before={"digest": H},
        brainstate_after={"digest": OTHER},
    ),
    StageTransition(from_stage="plan", to_stage="act", reason="ready"),
    PolicySnapshotRef(policy_bundle_hash=H, snapshot_id=OTHER, uri="mv2://policy/1"),
    RetrievalRequest(
        request_id="r1", query="capital of france", request_hash=hash_of("capital of france")
    ),
    RetrievalResponse(
        request_id="r1",
        hits=[RetrievalHit(uri="mv2://doc/1", score=0.75, explain={"bm25": 1.5})],
        retrieved_context_hashes=[OTHER],
    ),
    ToolCall(call_id="c1", tool="search", tool_schema_hash=H, arguments={"q": 1}),
    ToolResult.model_validate({"call_id": "c1", "status": "ok", "result": {"hits": 2}}),
    PatchApply(patch_id="p1", target="src/app.py", patch_hash=H, applied=True),
    GateDecision(gate="export", decision="escalate", reason="pii", policy_bundle_hash=H),
    ErrorEvent(code="E_TOOL", message="timeout", step="tool c1"),
    BranchMerged(branch="feature", into="main", merge_hash=H),
    CapsuleExported(capsule_uri="mv2://capsule/1", digest=H),
    CapsuleImported(capsule_uri="mv2://capsule/1", digest=H),
    model_call(),
    signed_identity(),
    JobCompleted(
        final_output="2 + 3 = 5",
        replayable=True,
        missing_artifacts=[],
        selfrep=MaterialisedState.of({"agents": {}}),
        brainstate=None,
    ),
]


def _ids(events: list[RunEvent]) -> list[str]:
    return [event.EVENT_TYPE for event in events]


# The types


def test_samples_cover_every_recorded_type() -> None:
    assert sorted(_ids(SAMPLES)) == sorted(ALL_TYPES)


@pytest.mark.parametrize("name", SEED_003_TYPES)
def test_every_seed_003_type_exists_with_schema_version_1(name: str) -> None:
    cls = ALL_TYPES[name]
    assert name == cls.EVENT_TYPE
    assert cls in EMITTED_TYPES
    assert cls.model_fields["schema_version"].default == 1
    assert cls.model_fields["type"].default == name


@pytest.mark.parametrize("event", SAMPLES, ids=_ids(SAMPLES))
def test_every_event_is_schema_version_1(event: RunEvent) -> None:
    assert event.payload()["schema_version"] == 1
    assert "type" not in event.payload()
    with pytest.raises(ValidationError, match="Input should be 1"):
        type(event).model_validate({**event.payload(), "schema_version": 2})


def test_model_call_envelope_carries_the_seed_002_trace_fields() -> None:
    assert set(SEED_002_FIELDS) <= set(ModelCallEnvelope.model_fields)
    payload = model_call().payload()
    assert {name: payload[name] for name in SEED_002_FIELDS} == {
        "model_id": "gpt-x",
        "model_version": "2024-01-01",
        "prompt_bundle_hash": H,
        "tool_schema_hash": OTHER,
        "temperature": 0.2,
        "seed": 7,
        "retrieved_context_hashes": [H, OTHER],
        "request_hash": hash_of(PROMPT),
        "response_hash": hash_of(RESPONSE),
    }


# Hashes


@pytest.mark.parametrize(
    ("make", "pairs"),
    [
        (model_call, [("prompt", "request_hash"), ("response", "response_hash")]),
        (agent_output, [("prompt", "request_hash"), ("response", "response_hash")]),
    ],
    ids=["ModelCallEnvelope", "AgentOutput"],
)
def test_hashes_are_computed_from_content_when_omitted(make: Any, pairs: Any) -> None:
    event = make()
    for content, hash_field in pairs:
        assert getattr(event, hash_field) == hash_of(getattr(event, content))
    assert make(request_hash=hash_of(PROMPT), response_hash=hash_of(RESPONSE)) == event


def test_tool_result_hash_is_computed_from_its_result() -> None:
    result = ToolResult.model_validate({"call_id": "c", "status": "ok", "result": [1, 2.0]})
    assert result.response_hash == hash_of([1, 2.0])


def test_hash_of_is_sha256_of_canonical_json() -> None:
    expected = "3d97890ea6cf62510ec3c0edb0c5df24ab9b074f185eb8798e8b8df611aeea03"
    assert hashlib.sha256(b'{"a":0.123456789,"b":1}').hexdigest() == expected
    assert hash_of({"b": 1, "a": 0.1234567891}) == expected
    assert hash_of({"a": 0.123456789, "b": 1}) == hash_of({"b": 1, "a": 0.1234567891})


@pytest.mark.parametrize(
    ("make", "field", "message"),
    [
        (
            model_call,
            "request_hash",
            "request_hash does not match the sha256 of the canonical JSON of prompt",
        ),
        (
            agent_output,
            "response_hash",
            "response_hash does not match the sha256 of the canonical JSON of response",
        ),
    ],
)
def test_a_wrong_given_hash_is_refused(make: Any, field: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make(**{field: OTHER})


def test_a_wrong_tool_result_hash_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"response_hash does not match .* of result"):
        ToolResult.model_validate(
            {"call_id": "c", "status": "ok", "result": 1, "response_hash": OTHER}
        )


def test_a_hash_without_content_is_kept_and_one_without_either_is_refused() -> None:
    hashed_only = model_call(prompt=None, response=None, request_hash=H, response_hash=OTHER)
    assert (hashed_only.request_hash, hashed_only.response_hash) == (H, OTHER)
    with pytest.raises(ValidationError, match="request_hash is required when prompt is not given"):
        model_call(prompt=None)
    with pytest.raises(ValidationError, match="response_hash is required when result is not given"):
        ToolResult.model_validate({"call_id": "c", "status": "ok"})


@pytest.mark.parametrize("bad", ["ABC", "0" * 63, "g" * 64, H.upper()])
def test_hashes_are_64_lowercase_hex(bad: str) -> None:
    with pytest.raises(ValidationError, match="String should match pattern"):
        PolicySnapshotRef(policy_bundle_hash=bad)


# Values without a canonical encoding


@pytest.mark.parametrize(
    "build",
    [
        lambda: model_call(temperature=float("nan")),
        lambda: model_call(temperature=float("inf")),
        lambda: model_call(prompt={"t": float("nan")}),
        lambda: RetrievalHit(uri="u", score=float("nan")),
        lambda: RunCompleted(final_output=float("nan")),
        lambda: RunCompleted(final_output=[1, float("-inf")]),
        lambda: SemRead(iteration=0, key="a/b/c/d", exists=True, value={"x": float("nan")}),
        lambda: RunCompleted(final_output=2**64),
        lambda: InputReceived(iteration=0, text="\ud800", user="u"),
    ],
    ids=[
        "temperature_nan",
        "temperature_inf",
        "prompt_nan",
        "score_nan",
        "output_nan",
        "output_inf",
        "value_nan",
        "big_int",
        "lone_surrogate",
    ],
)
def test_values_without_a_canonical_encoding_are_refused(build: Any) -> None:
    with pytest.raises(ValidationError):
        build()


def test_negative_temperature_is_refused() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        model_call(temperature=-0.1)


@pytest.mark.parametrize("event", SAMPLES, ids=_ids(SAMPLES))
def test_extra_fields_are_refused(event: RunEvent) -> None:
    with pytest.raises(ValidationError, match="bogus\n  Extra inputs are not permitted"):
        decode_recorded(event.EVENT_TYPE, {**event.payload(), "bogus": 1})


def test_events_are_frozen() -> None:
    event = StageTransition(to_stage="act")
    with pytest.raises(ValidationError, match="frozen"):
        event.to_stage = "plan"  # type: ignore[misc]


@pytest.mark.parametrize("seed", [True, False, 1.0], ids=["true", "false", "float"])
def test_run_started_refuses_a_seed_that_is_not_a_string_or_an_integer(seed: Any) -> None:
    with pytest.raises(ValidationError):
        RunStarted.model_validate({"seed": seed, "input": "x"})


def test_run_started_refuses_an_empty_seed_and_bad_snapshot_ids() -> None:
    with pytest.raises(ValidationError, match="seed must be a non-empty string or an integer"):
        RunStarted(seed="", input="x")
    with pytest.raises(ValidationError, match=r"snapshot_ids\.router: expected 64 lowercase hex"):
        RunStarted(seed="s", input="x", snapshot_ids={SnapshotKind.ROUTER: "abc"})


# JSON Schema and decoding


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def test_json_schema_is_a_json_schema_of_every_line_type() -> None:
    schema = json_schema()
    assert json.loads(json.dumps(schema)) == schema
    assert schema["$id"] == "https://mace-ledger.dev/schemas/run-event-v1.json"
    assert schema["title"] == "MACE Run Event Schema v1"
    assert schema["discriminator"]["propertyName"] == "type"
    assert set(schema["discriminator"]["mapping"]) == set(LINE_TYPES)
    assert set(SEED_003_TYPES) <= set(LINE_TYPES)
    assert sorted(alt["$ref"] for alt in schema["oneOf"]) == sorted(
        f"#/$defs/{name}" for name in LINE_TYPES
    )
    for ref in _refs(schema):
        assert ref.startswith("#/$defs/")
        assert ref.removeprefix("#/$defs/") in schema["$defs"]
    for name in LINE_TYPES:
        definition = schema["$defs"][name]
        assert definition["type"] == "object"
        assert definition["additionalProperties"] is False
        assert definition["properties"]["type"]["const"] == name
        assert definition["properties"]["schema_version"]["const"] == 1


def test_json_schema_requires_the_seed_002_fields_of_a_model_call() -> None:
    definition = json_schema()["$defs"]["ModelCallEnvelope"]
    assert set(SEED_002_FIELDS) <= set(definition["properties"])
    assert {"model_id", "model_version", "prompt_bundle_hash", "temperature"} <= set(
        definition["required"]
    )


@pytest.mark.parametrize("event", SAMPLES, ids=_ids(SAMPLES))
def test_decode_recorded_round_trips_the_payload(event: RunEvent) -> None:
    stored = orjson.loads(orjson.dumps(event.payload()))
    decoded = decode_recorded(event.EVENT_TYPE, stored)
    assert decoded == event
    assert decoded.payload() == event.payload()


def test_decode_recorded_refuses_an_unknown_type() -> None:
    with pytest.raises(ValueError, match="unknown run event type 'Nope'"):
        decode_recorded("Nope", {})


# Capture modes


@pytest.mark.parametrize(
    ("mode", "prompt", "response"),
    [
        (CaptureMode.FULL_IO, PROMPT, RESPONSE),
        (CaptureMode.PROMPTS_ONLY, PROMPT, None),
        (CaptureMode.NONE, None, None),
    ],
)
@pytest.mark.parametrize("make", [model_call, agent_output], ids=["model_call", "agent_output"])
def test_apply_capture_keeps_what_the_mode_says_and_every_hash(
    make: Any, mode: CaptureMode, prompt: Any, response: Any
) -> None:
    event = make()
    captured = apply_capture(event, mode)
    assert (captured.prompt, captured.response) == (prompt, response)
    assert captured.request_hash == event.request_hash == hash_of(PROMPT)
    assert captured.response_hash == event.response_hash == hash_of(RESPONSE)
    assert decode_recorded(captured.EVENT_TYPE, captured.payload()) == captured


@pytest.mark.parametrize("mode", list(CaptureMode))
def test_apply_capture_leaves_other_events_alone(mode: CaptureMode) -> None:
    for event in SAMPLES:
        if not isinstance(event, AgentOutput | ModelCallEnvelope | IterationTrace):
            assert apply_capture(event, mode) is event


@pytest.mark.parametrize(
    ("mode", "kept"),
    [
        (CaptureMode.FULL_IO, {"prompt", "response"}),
        (CaptureMode.PROMPTS_ONLY, {"prompt"}),
        (CaptureMode.NONE, set()),
    ],
)
def test_apply_capture_takes_from_a_traces_agent_outputs_what_it_takes_from_the_outputs(
    mode: CaptureMode, kept: set[str]
) -> None:
    # A run sent in with prompts_only kept its responses in the trace's copy of each output.
    (trace,) = [e for e in SAMPLES if isinstance(e, IterationTrace)]
    entry = {"agent": "a", "prompt": "p", "response": "r", "response_hash": H, "error": None}
    captured = apply_capture(trace.model_copy(update={"agent_outputs": [entry]}), mode)
    (stored,) = captured.agent_outputs
    assert {k for k in ("prompt", "response") if stored[k] is not None} == kept
    assert (stored["response_hash"], stored["agent"]) == (H, "a")


# Missing artifacts

ALL_SNAPSHOTS = {kind.value: hash_of(kind.value) for kind in SnapshotKind}
STORED = frozenset(ALL_SNAPSHOTS.values())


def test_nothing_is_missing_from_a_full_io_job() -> None:
    events = list(enumerate(SAMPLES))
    held = {H}  # the policy bundle the samples' gate and policy reference name
    assert missing_artifacts(ALL_SNAPSHOTS, STORED, events, CaptureMode.FULL_IO, held) == []


def test_a_policy_bundle_the_ledger_does_not_hold_is_missing() -> None:
    events = list(enumerate(SAMPLES))
    missing = missing_artifacts(ALL_SNAPSHOTS, STORED, events, CaptureMode.FULL_IO)
    assert [(m.event_type, m.step, m.missing) for m in missing] == [
        (kind, f"policy bundle {H}", ["policy_bundle"])
        for kind in ("PolicySnapshotRef", "GateDecision")
    ]


def test_missing_snapshots_come_first_in_snapshot_order() -> None:
    declared = {k: v for k, v in ALL_SNAPSHOTS.items() if k != "privacy"}
    stored = STORED - {ALL_SNAPSHOTS["router"]}
    missing = missing_artifacts(declared, stored, [], CaptureMode.FULL_IO)
    assert missing == [
        MissingArtifact(
            sequence_index=None,
            event_type="JobStarted",
            step="router snapshot",
            missing=["snapshot"],
            reason=f"snapshot {ALL_SNAPSHOTS['router']} is not in the ledger",
        ),
        MissingArtifact(
            sequence_index=None,
            event_type="JobStarted",
            step="privacy snapshot",
            missing=["snapshot"],
            reason="the job declares no privacy snapshot",
        ),
    ]


@pytest.mark.parametrize(
    ("mode", "absent"),
    [(CaptureMode.PROMPTS_ONLY, ["response"]), (CaptureMode.NONE, ["prompt", "response"])],
)
def test_model_response_missing(mode: CaptureMode, absent: list[str]) -> None:
    events = [(4, apply_capture(model_call(), mode)), (5, apply_capture(agent_output(), mode))]
    reason = f"capture mode {mode.value} stores the hash of {' and '.join(absent)} only"
    assert missing_artifacts(ALL_SNAPSHOTS, STORED, events, mode) == [
        MissingArtifact(
            sequence_index=4,
            event_type="ModelCallEnvelope",
            step="model call m1 (gpt-x 2024-01-01)",
            missing=absent,
            reason=reason,
        ),
        MissingArtifact(
            sequence_index=5,
            event_type="AgentOutput",
            step="iteration 0 agent math_agent",
            missing=absent,
            reason=reason,
        ),
    ]


def test_content_the_mode_would_keep_but_the_emitter_left_out() -> None:
    hashed_only = agent_output(response=None, response_hash=OTHER)
    [missing] = missing_artifacts(ALL_SNAPSHOTS, STORED, [(2, hashed_only)], CaptureMode.FULL_IO)
    assert missing.missing == ["response"]
    assert missing.reason == "the emitter recorded the hash of response only"


def test_a_failed_agent_output_needs_its_prompt_only() -> None:
    failed = agent_output(status="failed", response=None, response_hash=hash_of(None), error="E")
    assert missing_artifacts(ALL_SNAPSHOTS, STORED, [(3, failed)], CaptureMode.FULL_IO) == []
    none = apply_capture(failed, CaptureMode.NONE)
    [missing] = missing_artifacts(ALL_SNAPSHOTS, STORED, [(3, none)], CaptureMode.NONE)
    assert missing.missing == ["prompt"]


def test_a_declined_agent_output_needs_its_prompt_only() -> None:
    declined = agent_output(
        agent="profile_agent", status="declined", response=None, response_hash=hash_of(None)
    )
    assert missing_artifacts(ALL_SNAPSHOTS, STORED, [(3, declined)], CaptureMode.FULL_IO) == []


def test_tool_result_missing() -> None:
    hashed_only = ToolResult(call_id="c1", status="ok", response_hash=H)
    errored = ToolResult(call_id="c2", status="error", response_hash=H)
    events: list[tuple[int, RunEvent]] = [(7, hashed_only), (8, errored)]
    assert missing_artifacts(ALL_SNAPSHOTS, STORED, events, CaptureMode.FULL_IO) == [
        MissingArtifact(
            sequence_index=7,
            event_type="ToolResult",
            step="tool result c1",
            missing=["result"],
            reason="the emitter recorded the hash of result only",
        )
    ]


# Run files


def _line(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data)


START = _line({"type": "RunStarted", "seed": "s1", "input": "2 + 3"})
END = _line({"type": "RunCompleted", "final_output": "5"})
STEP = _line({"type": "StageTransition", "to_stage": "act"})
EXPECTED_TYPES = ", ".join(LINE_TYPES)


def test_parse_run_reads_start_events_and_completion() -> None:
    parsed = parse_run([START, b"", STEP, b"  \n", END])
    assert parsed == ParsedRun(
        started=RunStarted(seed="s1", input="2 + 3"),
        events=[StageTransition(to_stage="act")],
        completed=RunCompleted(final_output="5"),
    )
    assert parse_run([START, END]).events == []


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        (
            [START, _line({"type": "Nope"}), END],
            2,
            f"line 2: field type: 'Nope', expected one of {EXPECTED_TYPES}",
        ),
        (
            [START, _line({"to_stage": "act"}), END],
            2,
            f"line 2: field type: missing, expected one of {EXPECTED_TYPES}",
        ),
        (
            [START, _line({"type": "InputReceived", "iteration": 0, "user": "u"}), END],
            2,
            "line 2: field text: Field required",
        ),
        (
            [START, b"", _line({"type": "StageTransition", "to_stage": "a", "zz": 1}), END],
            3,
            "line 3: field zz: Extra inputs are not permitted",
        ),
        (
            [START, _line({"type": "InputReceived", "iteration": -1, "text": "t", "user": "u"})],
            2,
            "line 2: field iteration: Input should be greater than or equal to 0",
        ),
        (
            [
                START,
                _line(
                    {
                        "type": "RetrievalResponse",
                        "request_id": "r",
                        "hits": [{"uri": "u", "score": "high"}],
                        "response_hash": H,
                    }
                ),
                END,
            ],
            2,
            "line 2: field hits[0].score: Input should be a valid number, "
            "unable to parse string as a number",
        ),
        (
            [
                START,
                _line(
                    {
                        "type": "ToolResult",
                        "call_id": "c",
                        "status": "ok",
                        "result": 1,
                        "response_hash": OTHER,
                    }
                ),
                END,
            ],
            2,
            "line 2: response_hash does not match the sha256 of the canonical JSON of result",
        ),
        ([START, b"[1, 2]", END], 2, "line 2: expected a JSON object, got list"),
        ([START, b'"text"', END], 2, "line 2: expected a JSON object, got str"),
        ([END, START], 1, "line 1: a run starts with RunStarted, not RunCompleted"),
        ([STEP, END], 1, "line 1: a run starts with RunStarted, not StageTransition"),
        ([START], 1, "line 1: a run ends with RunCompleted"),
        ([START, STEP], 2, "line 2: a run ends with RunCompleted"),
        ([START, START, END], 2, "line 2: RunStarted may only open or close the run"),
        ([START, STEP, END, END], 3, "line 3: RunCompleted may only open or close the run"),
        ([], 1, "line 1: no events: a run is RunStarted, its events, then RunCompleted"),
        ([b"", b"  "], 1, "line 1: no events: a run is RunStarted, its events, then RunCompleted"),
    ],
    ids=[
        "unknown_type",
        "missing_type",
        "missing_field",
        "extra_field_after_blank_line",
        "invalid_field",
        "nested_field",
        "wrong_hash",
        "array",
        "string",
        "first_line_completed",
        "first_line_event",
        "no_completion",
        "last_line_event",
        "started_in_the_middle",
        "completed_in_the_middle",
        "empty",
        "blank",
    ],
)
def test_parse_run_errors_name_the_line_and_the_field(
    lines: list[bytes], line: int, message: str
) -> None:
    with pytest.raises(RunFileError) as caught:
        parse_run(lines)
    assert caught.value.line == line
    assert str(caught.value) == message


def test_parse_run_malformed_json_names_the_line() -> None:
    with pytest.raises(RunFileError) as caught:
        parse_run([START, STEP, b'{"type": "StageTransition",', END])
    assert caught.value.line == 3
    assert str(caught.value).startswith("line 3: not JSON: ")


def test_parse_run_validates_every_line_before_the_structure() -> None:
    # A bad event late in the file is reported even though the first line is wrong too.
    with pytest.raises(RunFileError) as caught:
        parse_run([STEP, _line({"type": "Nope"})])
    assert caught.value.line == 2
