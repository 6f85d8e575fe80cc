"""Spans made by the real OpenTelemetry SDK (a client we did not write), as a traced agent makes
them: an ``invoke_agent`` root, a ``chat`` call that asks for a tool, the ``execute_tool`` span,
all in the GenAI semantic conventions, set by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer


def traced_agent(
    tracer: Tracer, city: str = "Paris", snapshots: Mapping[str, str] | None = None
) -> None:
    """One agent run: the spans end children first, the root last, as an SDK exports them.
    ``snapshots``: the ids (by kind) its root declares (``mace.snapshot.<kind>``)."""
    with tracer.start_as_current_span("invoke_agent weather") as root:
        for kind, snapshot_id in (snapshots or {}).items():
            root.set_attribute(f"mace.snapshot.{kind}", snapshot_id)
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", "weather")
        root.set_attribute("gen_ai.input.messages", f"Weather in {city}?")
        with tracer.start_as_current_span("chat gpt-4o") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", "gpt-4o")
            chat.set_attribute("gen_ai.response.model", "gpt-4o-2024-08-06")
            chat.set_attribute("gen_ai.request.temperature", 0.0)
            chat.set_attribute("gen_ai.request.seed", 7)
            chat.set_attribute(
                "gen_ai.input.messages",
                f'[{{"role": "user", "parts": [{{"type": "text", "content": "{city}?"}}]}}]',
            )
            chat.set_attribute(
                "gen_ai.output.messages",
                '[{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1",'
                ' "name": "get_weather"}]}]',
            )
        with tracer.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.name", "get_weather")
            tool.set_attribute("gen_ai.tool.call.id", "call_1")
            tool.set_attribute("gen_ai.tool.call.arguments", f'{{"city": "{city}"}}')
            tool.set_attribute("gen_ai.tool.call.result", '{"sky": "sunny"}')
            tool.set_status(Status(StatusCode.OK))
        root.set_attribute("gen_ai.output.messages", "Sunny")


def recorded_spans(city: str = "Paris") -> list[ReadableSpan]:
    """The spans of one `traced_agent` run, as the SDK hands them to an exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced_agent(provider.get_tracer("weather-agent"), city)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def protobuf_export(spans: Sequence[ReadableSpan]) -> bytes:
    """An ``ExportTraceServiceRequest`` of ``spans``, encoded by the OTLP exporter's own encoder."""
    return encode_spans(spans).SerializeToString()


def provider_exporting_to(exporter: SpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider
