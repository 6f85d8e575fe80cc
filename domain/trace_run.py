"""A whole OpenTelemetry trace as a Run Event Schema v1 run (docs/otlp.md has the table).

Both vocabularies are read: the GenAI semantic conventions (``gen_ai.operation.name`` ``chat``,
``text_completion``, ``generate_content``, ``execute_tool``, ``invoke_agent``...) and OpenInference
(``openinference.span.kind`` ``LLM``, ``TOOL``, ``RETRIEVER``, ``GUARDRAIL``, ``AGENT``...). A model
span becomes a ``ModelCallEnvelope``; a tool span a ``ToolCall`` and its ``ToolResult`` (paired by
``gen_ai.tool.call.id``, else the span id); a retriever span a ``RetrievalRequest`` and its
``RetrievalResponse``; a guardrail span a ``GateDecision``; a span whose status is ERROR and each
exception event an ``ErrorEvent``. Spans are taken in start-time order, then by span id.

Content is kept as the span carries it. Where a span holds no content (the GenAI conventions'
default), the event keeps a hash that names the span and what it did not carry
(`not_captured_hash`): it can never equal the hash of real content, so a replay that is handed
the content cannot be told it matches, and the job's verdict lists the step as missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast

import orjson
from pydantic import JsonValue, ValidationError

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.events import (
    ErrorEvent,
    GateDecision,
    ModelCallEnvelope,
    RetrievalRequest,
    RetrievalResponse,
    RunCompleted,
    RunEvent,
    RunStarted,
    ToolCall,
    ToolResult,
    hash_of,
)
from domain.job import MAX_INPUT_CHARS, CaptureMode
from domain.run_file import ParsedRun
from domain.snapshot import SnapshotKind
from domain.tool_boundary import ToolBoundaryError, check_tool_boundary, tool_steps
from domain.trace_spans import AttributeValue, Span, SpanError, root_of

OPERATION: Final = "gen_ai.operation.name"
SPAN_KIND: Final = "openinference.span.kind"

E = TypeVar("E", bound=RunEvent)

MODEL_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
MODEL, TOOL, RETRIEVER, GUARDRAIL = "model", "tool", "retriever", "guardrail"
_KIND_OF_SPAN_KIND: Final = {
    "LLM": MODEL,
    "TOOL": TOOL,
    "RETRIEVER": RETRIEVER,
    "GUARDRAIL": GUARDRAIL,
}

# Where each fact is read from, first match wins: GenAI semantic conventions, then OpenInference.
INPUT: Final = ("gen_ai.input.messages", "input.value")
OUTPUT: Final = ("gen_ai.output.messages", "output.value")
MODEL_ID: Final = ("gen_ai.request.model", "llm.model_name")
MODEL_VERSION: Final = ("gen_ai.response.model",)
TEMPERATURE: Final = "gen_ai.request.temperature"
SEED: Final = "gen_ai.request.seed"
INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_DEFINITIONS: Final = ("gen_ai.tool.definitions", "llm.tools")
TOOL_NAME: Final = ("gen_ai.tool.name", "tool.name")
TOOL_CALL_ID: Final = ("gen_ai.tool.call.id", "tool_call.id")
TOOL_DESCRIPTION: Final = ("gen_ai.tool.description", "tool.description")
TOOL_PARAMETERS: Final = ("tool.parameters", "tool.json_schema")
TOOL_ARGUMENTS: Final = ("gen_ai.tool.call.arguments", "input.value")
TOOL_RESULT: Final = ("gen_ai.tool.call.result", "output.value")
DOCUMENTS: Final = "retrieval.documents."
ERROR_TYPE: Final = "error.type"
SNAPSHOT: Final = "mace.snapshot."
KINDS: Final = tuple(kind.value for kind in SnapshotKind)
INPUT_MESSAGES: Final = "llm.input_messages."
OUTPUT_MESSAGES: Final = "llm.output_messages."


def span_kind(span: Span) -> str | None:
    """What the span is to a run: a model call, a tool, a retriever, a guardrail, or None."""
    operation = span.attributes.get(OPERATION)
    if operation in MODEL_OPERATIONS:
        return MODEL
    if operation == "execute_tool":
        return TOOL
    kind = span.attributes.get(SPAN_KIND)
    return _KIND_OF_SPAN_KIND.get(kind) if isinstance(kind, str) else None


def not_captured_hash(span: Span, what: str) -> str:
    """The hash kept for content a span did not carry: of a statement naming the span and what
    is missing, which no real content hashes to."""
    return hash_of({"not_captured": what, "trace_id": span.trace_id, "span_id": span.span_id})


def run_of_trace(spans: list[Span]) -> ParsedRun:
    """The run a whole trace (`domain.trace_spans.why_incomplete` said None) records.

    `SpanError` names the first span and attribute that cannot be taken in."""
    root = root_of(spans)
    made: list[tuple[Span, RunEvent]] = []
    for span in spans:
        made += [(span, event) for event in span_events(span)]
    events = [event for _, event in made]
    try:
        check_tool_boundary(tool_steps(events))
    except ToolBoundaryError as bad:
        raise SpanError(made[bad.position][0], TOOL_CALL_ID[0], str(bad)) from None
    started = _build(
        root,
        {"input": INPUT[0], "snapshot_ids": f"{SNAPSHOT}<kind>"},
        lambda: RunStarted(
            seed=root.trace_id,
            input=_input_text(root),
            snapshot_ids=_declared_snapshots(root),
            capture_mode=_capture_mode(events),
        ),
    )
    completed = _build(root, {}, lambda: RunCompleted(final_output=_content(root, OUTPUT)[1]))
    return ParsedRun(started, events, completed)


def _declared_snapshots(root: Span) -> dict[str, str]:
    """The snapshots the run declares (`mace.snapshot.<kind>` on its root span: the ledger's
    own attributes, for an agent whose routing, privacy and governance snapshots it holds)."""
    declared: dict[str, str] = {}
    for name, value in root.attributes.items():
        if not name.startswith(SNAPSHOT):
            continue
        kind = name.removeprefix(SNAPSHOT)
        if kind not in KINDS:
            raise SpanError(root, name, f"no snapshot kind {kind!r}: one of {', '.join(KINDS)}")
        if not isinstance(value, str):
            raise SpanError(root, name, "expected a snapshot id (64 lowercase hex characters)")
        declared[kind] = value
    return declared


def _capture_mode(events: list[RunEvent]) -> CaptureMode:
    # As much as the spans hold, so that nothing a span carried is dropped; the job's verdict
    # names each model call whose content is missing.
    calls = [e for e in events if isinstance(e, ModelCallEnvelope)]
    if any(call.response is not None for call in calls):
        return CaptureMode.FULL_IO
    if any(call.prompt is not None for call in calls):
        return CaptureMode.PROMPTS_ONLY
    return CaptureMode.NONE


def span_events(span: Span) -> list[RunEvent]:
    """The events one span gives, in order; `SpanError` when it cannot be taken in. Checks a
    span alone, as it arrives; pairing across spans is checked when the trace is whole."""
    kind = span_kind(span)
    made: list[RunEvent] = []
    if kind == MODEL:
        made.append(_model_call(span))
    elif kind == TOOL:
        made += _tool_call(span)
    elif kind == RETRIEVER:
        made += _retrieval(span)
    elif kind == GUARDRAIL:
        made.append(_gate(span))
    made += _errors(span)
    return made


def _build(span: Span, attributes: Mapping[str, str], make: Callable[[], E]) -> E:
    """``make()``, its refusal said as the span's: ``attributes`` maps an event field to the
    attribute it was read from."""
    try:
        return make()
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        raise SpanError(span, attributes.get(field, field or "(span)"), message) from None
    except InvalidInput as exc:
        raise SpanError(span, "(span)", str(exc)) from None


def _first(span: Span, names: tuple[str, ...]) -> tuple[str, AttributeValue | None]:
    """The first of ``names`` the span carries, and its value (the first name and None if none)."""
    for name in names:
        if name in span.attributes:
            return name, span.attributes[name]
    return names[0], None


def _json_value(value: AttributeValue | None) -> JsonValue:
    """An attribute as JSON: a string holding JSON (how the conventions carry messages,
    arguments and results) is decoded; other strings stay strings."""
    if isinstance(value, str):
        try:
            decoded: JsonValue = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return decoded
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def _flattened(span: Span, prefix: str) -> list[dict[str, JsonValue]] | None:
    """OpenInference's flattened lists (``llm.input_messages.0.message.role``...) as a list of
    objects, one per index, keyed by the rest of the attribute name; None when there are none."""
    items: dict[int, dict[str, JsonValue]] = {}
    for name, value in span.attributes.items():
        if not name.startswith(prefix):
            continue
        index, _, rest = name[len(prefix) :].partition(".")
        if not index.isdigit() or not rest:
            raise SpanError(span, name, f"expected {prefix}<index>.<field>")
        items.setdefault(int(index), {})[rest] = _json_value(value)
    return [items[i] for i in sorted(items)] or None


def _content(span: Span, names: tuple[str, ...]) -> tuple[str, JsonValue]:
    """The content the span carries under ``names`` (or OpenInference's message lists), as JSON,
    with the attribute it came from; None when the span carries none."""
    name, value = _first(span, names)
    if value is not None:
        return name, _json_value(value)
    prefix = INPUT_MESSAGES if names == INPUT else OUTPUT_MESSAGES if names == OUTPUT else None
    if prefix is not None:
        messages = cast(JsonValue, _flattened(span, prefix))
        return f"{prefix}*", messages
    return name, None


def _input_text(root: Span) -> str:
    name, value = _first(root, INPUT)
    if value is None:
        return ""
    text = value if isinstance(value, str) else canonical_json(_json_value(value)).decode()
    if len(text) > MAX_INPUT_CHARS:
        raise SpanError(root, name, f"longer than {MAX_INPUT_CHARS} characters (a run's input)")
    return text


def _text(span: Span, names: tuple[str, ...]) -> str | None:
    name, value = _first(span, names)
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise SpanError(span, name, f"expected a string, got {type(value).__name__}")
    return str(value)


def _parameters(span: Span) -> dict[str, Any]:
    """OpenInference's ``llm.invocation_parameters`` (a JSON object in a string), or {}."""
    raw = span.attributes.get(INVOCATION_PARAMETERS)
    if raw is None:
        return {}
    decoded = _json_value(raw)
    if not isinstance(decoded, dict):
        raise SpanError(span, INVOCATION_PARAMETERS, "expected a JSON object")
    return decoded


def _model_call(span: Span) -> ModelCallEnvelope:
    # None when neither attribute is there (OpenInference's spans of an agent traced without
    # content name no model): recorded as missing, never guessed (`domain.capture`).
    model_id = _text(span, MODEL_ID)
    parameters = _parameters(span)
    temperature_at, temperature = TEMPERATURE, span.attributes.get(TEMPERATURE)
    if temperature is None:
        # None when neither is there (an agent that leaves the provider's default): recorded as
        # missing, never guessed; the job's verdict lists the call (`domain.capture`).
        temperature_at, temperature = INVOCATION_PARAMETERS, parameters.get("temperature")
    seed_at, seed = SEED, span.attributes.get(SEED, parameters.get("seed"))
    if SEED not in span.attributes:
        seed_at = INVOCATION_PARAMETERS
    prompt_at, prompt = _content(span, INPUT)
    response_at, response = _content(span, OUTPUT)
    bundle = {
        "system_instructions": _json_value(span.attributes.get(SYSTEM_INSTRUCTIONS)),
        "tool_definitions": _content(span, TOOL_DEFINITIONS)[1],
    }
    fields = {
        "model_id": MODEL_ID[0],
        "model_version": MODEL_VERSION[0],
        "temperature": temperature_at,
        "seed": seed_at,
        "prompt": prompt_at,
        "response": response_at,
    }
    return _build(
        span,
        fields,
        lambda: ModelCallEnvelope(
            call_id=span.span_id,
            model_id=model_id,
            model_version=_text(span, MODEL_VERSION) or model_id,
            prompt_bundle_hash=hash_of(bundle),
            temperature=temperature,
            seed=seed,
            prompt=prompt,
            response=response,
            request_hash=None if prompt is not None else not_captured_hash(span, "prompt"),
            response_hash=None if response is not None else not_captured_hash(span, "response"),
        ),
    )


def _tool_call(span: Span) -> list[RunEvent]:
    tool = _text(span, TOOL_NAME)
    if tool is None:
        raise SpanError(span, TOOL_NAME[0], f"missing (or {TOOL_NAME[1]}): which tool ran")
    call_id = _text(span, TOOL_CALL_ID) or span.span_id
    schema = {
        "name": tool,
        "description": _text(span, TOOL_DESCRIPTION),
        "parameters": _json_value(_first(span, TOOL_PARAMETERS)[1]),
    }
    arguments_at, arguments = _content(span, TOOL_ARGUMENTS)
    result_at, result = _content(span, TOOL_RESULT)
    call = _build(
        span,
        {"tool": TOOL_NAME[0], "call_id": TOOL_CALL_ID[0], "arguments": arguments_at},
        lambda: ToolCall(
            call_id=call_id,
            tool=tool,
            tool_schema_hash=hash_of(schema),
            arguments=arguments,
            request_hash=None if arguments is not None else not_captured_hash(span, "arguments"),
        ),
    )
    answer = _build(
        span,
        {"result": result_at, "status": "status"},
        lambda: ToolResult(
            call_id=call_id,
            status="error" if span.error else "ok",
            result=result,
            response_hash=None if result is not None else not_captured_hash(span, "result"),
        ),
    )
    return [call, answer]


def _retrieval(span: Span) -> list[RunEvent]:
    query_at, query = _first(span, INPUT)
    if not isinstance(query, str):
        raise SpanError(span, query_at, "missing or not a string: the query a retrieval asked")
    documents = _flattened(span, DOCUMENTS) or []
    hits: list[dict[str, JsonValue]] = []
    contents: list[str] = []
    for position, document in enumerate(documents):
        at = f"{DOCUMENTS}{position}"
        if document.get("document.id") is None or document.get("document.score") is None:
            raise SpanError(span, at, "a retrieved document has document.id and document.score")
        hits.append({"uri": str(document["document.id"]), "score": document["document.score"]})
        if document.get("document.content") is not None:
            contents.append(hash_of(document["document.content"]))
    request = _build(
        span,
        {"query": query_at},
        lambda: RetrievalRequest(request_id=span.span_id, query=query),
    )
    response = _build(
        span,
        {"hits": DOCUMENTS + "*"},
        lambda: RetrievalResponse(
            request_id=span.span_id, hits=hits, retrieved_context_hashes=contents
        ),
    )
    return [request, response]


def _gate(span: Span) -> GateDecision:
    # Neither vocabulary has a decision attribute: a guardrail that tripped ends in ERROR.
    return _build(
        span,
        {"gate": "name"},
        lambda: GateDecision(
            gate=span.name,
            decision="deny" if span.error else "allow",
            reason=span.status_message or None,
        ),
    )


def _errors(span: Span) -> list[RunEvent]:
    made = [
        _error(
            span,
            event.attributes.get("exception.type", "exception"),
            event.attributes.get("exception.message", ""),
            {"code": "exception.type", "message": "exception.message"},
        )
        for event in span.events
        if event.name == "exception"
    ]
    if span.error and not made:
        code = span.attributes.get(ERROR_TYPE, "SPAN_STATUS_ERROR")
        made.append(_error(span, code, span.status_message, {"code": ERROR_TYPE}))
    return made


def _error(
    span: Span, code: AttributeValue, message: AttributeValue, fields: Mapping[str, str]
) -> RunEvent:
    step = f"span {span.span_id} {span.name}"
    return _build(span, fields, lambda: ErrorEvent(code=str(code), message=str(message), step=step))
