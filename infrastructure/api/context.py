"""What every endpoint needs: the ledger, the caller (from the bearer token) and their tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator

from domain.governance import Role, require_any
from domain.job import JOB_ID_PATTERN, validate_job_id
from domain.snapshot import SNAPSHOT_ID_PATTERN, check_snapshot_id
from infrastructure.api.bodies import ReplayAsk
from infrastructure.api.errors import ApiError, refusal
from infrastructure.application.errors import Code
from infrastructure.application.ledger import Ledger
from infrastructure.application.open_reexecutions import OpenReexecutions
from infrastructure.application.sessions import Sessions
from infrastructure.application.settings import Settings
from infrastructure.application.tokens import Principal, TokenRefused, Tokens, accepted

SESSION_COOKIE = "mace_session"
"""The dashboard's cookie: the id of a sign-in session (`application.sessions`), never a token."""
DASHBOARD = "/dashboard"
"""Where the dashboard's pages are: the only place its cookie is taken."""


@dataclass
class Service:
    """The state one running service shares between requests.

    ``ledger`` is ``MACE_STORE``'s: every route that writes, or may write, uses it. ``reader`` is
    the ledger of the routes that only read the log (`Ledger.open_for_reading`: ``MACE_READ_STORE``
    when it is set, else ``ledger`` itself), and answers as of its head. Routes that read but
    can write stay on ``ledger``: a job's log and events (an admin's read of personal data is
    recorded first), the listings, ``/metrics`` and the dashboard (they bring the read models up
    to date, in their tables), a run's state (a recorder reads back what it just sent), health
    and the newest checkpoint (facts of the store that takes the writes). ``sessions``: the
    dashboard's sign-ins, whose clock also says when a token has expired. ``reexecutions``: the
    re-executions agents hold open over HTTP, on ``ledger``.
    """

    settings: Settings
    ledger: Ledger
    tokens: Tokens
    reader: Ledger
    sessions: Sessions
    reexecutions: OpenReexecutions


def service(request: Request) -> Service:
    state: Service = request.app.state.service
    return state


_bearer = HTTPBearer(auto_error=False, description="a token from MACE_TOKENS_FILE")


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _dashboard_page(request: Request) -> bool:
    """Whether the request reads a dashboard page: the one thing a session cookie may do.

    A browser sends a cookie with every request to the site, whichever page made it, so the
    cookie is taken where it can do no harm: pages that only read (GET, HEAD), under
    `DASHBOARD`. The JSON API, and every write, takes the bearer token only; a cross-site
    request carrying the cookie is answered as one without a token."""
    path = request.url.path
    under = path == DASHBOARD or path.startswith(DASHBOARD + "/")
    return under and request.method in {"GET", "HEAD"}


def _accepted(request: Request, token: str) -> Principal:
    ctx = service(request)
    try:
        return accepted(ctx.tokens, token, ctx.sessions.clock()).principal
    except TokenRefused as exc:
        raise refusal(Code.UNAUTHENTICATED, str(exc)) from None


def caller(request: Request, credentials: Credentials) -> Principal:
    """The principal the request's bearer token names (or, on a dashboard page, its session
    cookie), else 401: no token, an unknown, revoked or expired one, or an ended session."""
    if credentials is not None and credentials.credentials:
        return _accepted(request, credentials.credentials)
    session_id = request.cookies.get(SESSION_COOKIE) if _dashboard_page(request) else None
    if session_id:
        signed_in = service(request).sessions.find(session_id)
        if signed_in is None:
            raise refusal(Code.UNAUTHENTICATED, "the session has ended: sign in again")
        return signed_in
    raise refusal(Code.UNAUTHENTICATED, "a bearer token is required")


async def presented(request: Request) -> Principal | None:
    """The principal a bearer token names, if one was presented and is accepted; never refuses.

    The bearer scheme is read here, not declared as a dependency, so the OpenAPI document does
    not list a token as required where it is optional.
    """
    credentials = await _bearer(request)
    if credentials is None or not credentials.credentials:
        return None
    try:
        return _accepted(request, credentials.credentials)
    except ApiError:
        return None


Caller = Annotated[Principal, Depends(caller)]
MaybeCaller = Annotated[Principal | None, Depends(presented)]
# The schema documents each id's pattern; the domain's own check gives the message.
JobIdPath = Annotated[
    str,
    Path(json_schema_extra={"pattern": JOB_ID_PATTERN.pattern}),
    AfterValidator(validate_job_id),
]
RunIdPath = JobIdPath
SnapshotIdPath = Annotated[
    str,
    Path(json_schema_extra={"pattern": SNAPSHOT_ID_PATTERN.pattern}),
    AfterValidator(check_snapshot_id),
]
Ctx = Annotated[Service, Depends(service)]


def require(principal: Principal, *roles: Role) -> None:
    """403 ``ACCESS_DENIED`` unless the caller holds one of ``roles``."""
    require_any(principal.actor, roles)


def owned_job_id(job_id: JobIdPath, ctx: Ctx, who: Caller) -> str:
    """The path's job id, once the caller's tenant is found to hold the job (the one rule,
    `application.tenancy`): another tenant's job of the same id answers 404 as none would."""
    ctx.ledger.jobs.owned_name(job_id, who.tenant)
    return job_id


OwnedJobId = Annotated[str, Depends(owned_job_id)]
"""A job id in the path, of a job the caller's tenant holds."""


def read_job_id(job_id: JobIdPath, ctx: Ctx, who: Caller) -> str:
    """As `owned_job_id`, found on the ledger that reading routes read (`Service.reader`)."""
    ctx.reader.jobs.owned_name(job_id, who.tenant)
    return job_id


ReadJobId = Annotated[str, Depends(read_job_id)]
"""A job id in the path of a reading route, of a job the caller's tenant holds."""


def owned_replay_ask(body: ReplayAsk, ctx: Ctx, who: Caller) -> ReplayAsk:
    """A replay request's body, once the caller's tenant is found to hold the job it names."""
    ctx.ledger.jobs.owned_name(body.job_id, who.tenant)
    return body


OwnedReplayAsk = Annotated[ReplayAsk, Depends(owned_replay_ask)]
"""A replay request for a job the caller's tenant holds."""
