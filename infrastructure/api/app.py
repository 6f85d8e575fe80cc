"""The HTTP service: one FastAPI app over the same ledger and use cases as the CLI."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from importlib.metadata import version
from typing import Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

from infrastructure.api import (
    access_log,
    audits,
    checkpoints,
    dashboard,
    fork,
    governance,
    health,
    jobs,
    memories,
    metrics,
    policy,
    receipts,
    reexecutions,
    replays,
    runs,
    snapshots,
    traces,
    whatif,
)
from infrastructure.api.context import Service
from infrastructure.api.errors import ERROR_ANSWERS, ApiError, invalid
from infrastructure.api.json_bodies import OneValueBodies
from infrastructure.api.limits import BodyLimit
from infrastructure.api.responses import CanonicalJSONResponse
from infrastructure.application.errors import ERRORS, Code, failure_of
from infrastructure.application.ledger import Ledger
from infrastructure.application.limits import InputLimits
from infrastructure.application.notary import Notary
from infrastructure.application.open_reexecutions import OpenReexecutions
from infrastructure.application.sessions import Sessions
from infrastructure.application.settings import Settings
from infrastructure.application.tokens import Tokens
from infrastructure.application.trace_intake import TraceCloser
from infrastructure.application.witnesses import policy_witnessing

METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(app: FastAPI, scope: Scope) -> str:
    """The methods some route takes at this request's path, as a 405's ``Allow`` names them.

    Asked of every route, not taken from the framework's 405: that one names only the first
    route at the path (``GET /v1/jobs`` hid ``POST /v1/jobs``)."""
    return ", ".join(
        method
        for method in METHODS
        if any(
            route.matches({**scope, "method": method})[0] is Match.FULL
            for route in app.router.routes
        )
    )


def create_app(
    settings: Settings,
    tokens: Tokens,
    ledger: Ledger | None = None,
    *,
    notary: bool = False,
    close_traces: bool = False,
    reader: Ledger | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The service over ``ledger`` (default: the one the settings name, opened at start-up),
    its reading routes over ``reader`` (default: ``MACE_READ_STORE``'s ledger, opened at
    start-up, when it is set; else ``ledger``: see `Service`).

    With ``notary``, a `Notary` checkpoints the store while the service is up and once more as
    it shuts down: in the lifespan, so the last checkpoint is written before the server says it
    has shut down, whatever signal stopped it. With ``close_traces``, a `TraceCloser` records
    the traces held from OTLP exports once whole and quiet (as often as the notary looks).
    ``clock``: the wall clock that dashboard sessions, token expiry and the traces' quiet period
    are told by (operations time, never a decision input).
    """
    sessions = Sessions(tokens, settings.session_idle_seconds, settings.session_max_seconds, clock)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with (
            nullcontext(ledger) if ledger is not None else Ledger.open(settings) as opened,
            reading_ledger(settings, opened) if reader is None else nullcontext(reader) as reading,
        ):
            reexecutions = OpenReexecutions(
                opened.recordings,
                settings.reexecution_idle_seconds,
                clock,
                settings.max_open_reexecutions,
            )
            app.state.service = Service(settings, opened, tokens, reading, sessions, reexecutions)
            notarised = (
                Notary(
                    opened.checkpoints,
                    settings.checkpoint_interval,
                    policy_witnessing(settings, opened.checkpoints),
                ).running()
                if notary
                else nullcontext()
            )
            closing = (
                TraceCloser(
                    opened.trace_intake,
                    settings.trace_quiet_seconds,
                    settings.checkpoint_interval,
                    clock,
                ).running()
                if close_traces
                else nullcontext()
            )
            # Inside the notary: what stopping records of open re-executions is checkpointed.
            with notarised, closing, reexecutions.running():
                yield

    app = FastAPI(
        title="MACE Ledger",
        version=version("mace-ledger"),
        description="Signed, replayable records of AI-agent runs.",
        default_response_class=CanonicalJSONResponse,
        lifespan=lifespan,
        openapi_url=None,
        responses=ERROR_ANSWERS,
    )

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> Response:
        return CanonicalJSONResponse(app.openapi())

    for module in (
        access_log,
        health,
        runs,
        jobs,
        replays,
        reexecutions,
        whatif,
        fork,
        audits,
        governance,
        snapshots,
        memories,
        policy,
        receipts,
        checkpoints,
        metrics,
        traces,
        dashboard,
    ):
        app.include_router(module.router)
    # Added first, so inside the body limit: nothing over it is held to be read.
    app.add_middleware(OneValueBodies)
    app.add_middleware(BodyLimit, limit=InputLimits.of(settings).body_bytes)
    _answer_errors(app)
    return app


def reading_ledger(settings: Settings, ledger: Ledger) -> AbstractContextManager[Ledger]:
    """The read store's ledger, opened (and closed) with the service; else ``ledger`` itself."""
    if settings.parsed_read_store() is None:
        return nullcontext(ledger)
    return Ledger.open_for_reading(settings)


def _answer_errors(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        if request.url.path.startswith("/dashboard"):
            return dashboard.error_page(exc)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return CanonicalJSONResponse(exc.body(), status_code=exc.status, headers=headers)

    async def answer(request: Request, error: ApiError) -> Response:
        return await api_error(request, error)

    async def validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ()))
        problem = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        return await answer(request, invalid(f"{field}: {problem}", field))

    async def unrouted(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # A body the framework could not parse at all (e.g. an integer of thousands of
            # digits) is bad input like any other: 422, naming the body.
            message = f"body: not a JSON body we can read ({exc.detail})"
            return await answer(request, invalid(message, "body"))
        code = {404: Code.NOT_FOUND, 405: Code.METHOD_NOT_ALLOWED}.get(
            exc.status_code, f"HTTP_{exc.status_code}"
        )
        message = f"no such resource: {request.method} {request.url.path}"
        if exc.status_code != 404:
            message = f"{exc.detail}: {request.method} {request.url.path}"
        response = await answer(request, ApiError(exc.status_code, code, message))
        if exc.status_code == 405:
            # HTTP requires a 405 to name, in Allow, the methods the resource does take.
            response.headers["Allow"] = allowed_methods(app, request.scope)
        return response

    async def product_error(request: Request, exc: Exception) -> Response:
        failure = failure_of(exc)
        assert failure is not None, "registered for the error table's types only"
        response = await answer(request, ApiError.of_exception(failure, exc))
        if failure.code == Code.STORE_BUSY:
            response.headers["Retry-After"] = "1"
        return response

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, unrouted)
    app.add_exception_handler(RequestValidationError, validation)
    for kind in ERRORS:
        app.add_exception_handler(kind, product_error)
