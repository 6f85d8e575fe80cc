"""``POST /v1/traces``: OTLP/HTTP trace export (the OpenTelemetry protocol's own route).

Answers as the OTLP/HTTP specification says: the body is protobuf (``application/x-protobuf``)
or OTLP/JSON (``application/json``), plain or ``Content-Encoding: gzip``; success is 200 with an
``ExportTraceServiceResponse`` in the request's encoding, whose ``partial_success`` counts the
spans rejected and says why (each line names the span and the attribute); a body that cannot be
decoded is 400, one too large 413 (``MACE_MAX_BODY_BYTES`` after decompression, more spans than
``MACE_MAX_BATCH_EVENTS``), another content type or encoding 415, each with a
``google.rpc.Status`` body. The caller is the bearer token's, the spans are held for its tenant
(`application.trace_intake`), and each trace is recorded as a run once whole and quiet.
"""

from __future__ import annotations

import time
import zlib
from typing import Final

from fastapi import APIRouter, Request, Response
from google.protobuf.json_format import MessageToJson
from google.protobuf.message import Message
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)
from starlette.concurrency import run_in_threadpool

from domain.errors import InvalidInput
from domain.governance import Role
from domain.run_draft import RunTooLarge
from infrastructure.api.context import Caller, Ctx, require
from infrastructure.application.limits import InputLimits
from infrastructure.application.otlp_decoding import spans_of_json, spans_of_protobuf

router = APIRouter(tags=["traces"])
RECORDERS = (Role.OPERATOR, Role.ADMIN)
PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
INVALID_ARGUMENT: Final = 3
"""google.rpc.Code INVALID_ARGUMENT, the code of a 400's ``Status``."""
SHOWN_REJECTIONS: Final = 5


@router.post(
    "/v1/traces",
    summary="OTLP/HTTP trace export: spans held per tenant and trace, each whole trace a run",
    response_model=None,
    # Its contract is the OTLP/HTTP specification's (protobuf bodies, google.rpc.Status errors),
    # not the JSON API's document: docs/http-api.md describes it.
    include_in_schema=False,
)
async def export_traces(request: Request, ctx: Ctx, who: Caller) -> Response:
    require(who, *RECORDERS)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in {PROTOBUF, JSON}:
        return _status(
            JSON, 415, f"content type {media or 'missing'}: expected {PROTOBUF} or {JSON}"
        )
    limits = InputLimits.of(ctx.settings)
    try:
        body = _decoded(request.headers.get("content-encoding", ""), await request.body(), limits)
        spans = spans_of_protobuf(body) if media == PROTOBUF else spans_of_json(body)
        limits.check_batch(len(spans))
    except _Unsupported as exc:
        return _status(media, 415, str(exc))
    except RunTooLarge as exc:
        return _status(media, 413, str(exc))
    except InvalidInput as exc:
        return _status(media, 400, str(exc))
    # The ledger's calls block: off the event loop, as the framework runs a plain route.
    intake = await run_in_threadpool(
        ctx.ledger.trace_intake.hold,
        spans,
        who.tenant,
        time.time(),
        ctx.settings.trace_quiet_seconds,
    )
    answer = ExportTraceServiceResponse()
    if intake.rejected:
        shown = "; ".join(intake.rejected[:SHOWN_REJECTIONS])
        more = len(intake.rejected) - SHOWN_REJECTIONS
        answer.partial_success.CopyFrom(
            ExportTracePartialSuccess(
                rejected_spans=len(intake.rejected),
                error_message=shown + (f"; and {more} more" if more > 0 else ""),
            )
        )
    return _answer(media, 200, answer)


class _Unsupported(Exception):
    """A content encoding the service does not decode (415)."""


def _decoded(encoding: str, body: bytes, limits: InputLimits) -> bytes:
    """The body as sent before its content encoding, refused past the body limit as it is
    inflated (a small gzip body may inflate to far more)."""
    encoding = encoding.strip().lower()
    if encoding in {"", "identity"}:
        return body
    if encoding != "gzip":
        msg = f"content encoding {encoding}: expected gzip or none"
        raise _Unsupported(msg)
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        inflated = inflater.decompress(body, limits.body_bytes + 1)
    except zlib.error as exc:
        msg = f"the body is not gzip: {exc}"
        raise InvalidInput(msg) from None
    if len(inflated) > limits.body_bytes:
        msg = f"request body larger than {limits.body_bytes} bytes (MACE_MAX_BODY_BYTES) inflated"
        raise RunTooLarge(msg)
    return inflated


def _status(media: str, status: int, message: str) -> Response:
    return _answer(media, status, Status(code=INVALID_ARGUMENT, message=message))


def _answer(media: str, status: int, message: Message) -> Response:
    if media == PROTOBUF:
        return Response(message.SerializeToString(), status, media_type=PROTOBUF)
    return Response(MessageToJson(message, indent=None), status, media_type=JSON)
