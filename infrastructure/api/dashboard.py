"""The operators' dashboard: server-rendered HTML, readable with JavaScript off.

It shows the caller's tenant: the replay evidence, jobs production replay cannot redo and what
each lacks, recent replays with their outcome, error code and authority, and halted snapshots;
the tenant's jobs, searched and paged in the store (`projections.job_search`: the filters are the
URL's query parameters, so a search can be bookmarked); each job links to its events (payloads
laid out as definition lists, personal data as the API shows it to the caller) and its
governance log, and each replay to its report, a divergence shown side by side. The audits page
lists the tenant's batch audits and their totals; the governance page, every governance event the
tenant sees, newest first. Every page only reads. A person signs in with a token from the tokens
file; it is kept in a same-site, HTTP-only cookie.
"""

from __future__ import annotations

from pathlib import Path as FilePath
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from domain.canonical import canonical_json
from domain.errors import InvalidInput, NotFoundError
from infrastructure.api.context import (
    SESSION_COOKIE,
    Caller,
    Ctx,
    OwnedJobId,
    service,
)
from infrastructure.api.errors import ApiError, not_found
from infrastructure.api.metrics import tenant_evidence, tenant_replays
from infrastructure.application.governance import ABANDONED
from infrastructure.application.personal_data import HTTP_CHANNEL
from infrastructure.application.tokens import Principal
from projections.job_search import (
    PAGE_SIZE,
    STATUSES,
    JobQuery,
    Replayability,
    parse_job_query,
)
from projections.read_model_rows import HALTED_SNAPSHOTS, REPLAY_OUTCOMES
from projections.replay_report import verdict
from projections.side_by_side import side_by_side

router = APIRouter(prefix="/dashboard", include_in_schema=False)
RECENT = 50
_GOVERNANCE_COLUMNS = frozenset({"scope", "event", "actor_id", "recorded_at"})
TEMPLATES = Environment(
    loader=FileSystemLoader(FilePath(__file__).parent / "web" / "templates"),
    autoescape=select_autoescape(["html"]),
)
# A value as its canonical JSON, for a person: Jinja's own tojson writes ' as \u0027 (it is
# meant for scripts); autoescape makes this text safe in HTML.
TEMPLATES.filters["json"] = lambda value: canonical_json(value).decode()


def _page(template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    html = TEMPLATES.get_template(template).render(**context)
    return HTMLResponse(html, status_code=http_status)


def login_page(problem: str | None = None, status: int = 200) -> HTMLResponse:
    return _page("login.html", status, who=None, problem=problem)


def error_page(error: ApiError) -> HTMLResponse:
    """An error on a dashboard page, for a person: the sign-in form when they need to sign in."""
    if error.status == 401:
        return login_page(None if error.message.startswith("a bearer") else error.message, 401)
    return _page(
        "error.html",
        error.status,
        who=None,
        status=error.status,
        code=error.code,
        message=error.message,
    )


@router.get("", response_class=HTMLResponse)
def overview(ctx: Ctx, who: Caller) -> HTMLResponse:
    models = ctx.ledger.read_models
    mine = who.tenant
    replays = tenant_replays(ctx, who)
    replays.sort(key=lambda r: (r["requested_at"], r["job_id"], r["attempt"]), reverse=True)
    gaps = models.gaps(mine)
    gaps.sort(key=lambda r: str(r["job_id"]))
    # The halts that stop this tenant's replays: its own and store-wide ones (tenant null).
    halts = [r for r in models.rows(HALTED_SNAPSHOTS) if r.get("tenant") in {mine, None}]
    halts.sort(key=lambda r: str(r["halted_at"]))
    return _page(
        "overview.html",
        who=who,
        evidence=tenant_evidence(ctx, who),
        gaps=gaps[:RECENT],
        gap_count=len(gaps),
        abandoned=[r for r in replays if r["outcome"] == ABANDONED],
        replays=replays[:RECENT],
        halts=halts,
    )


@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(request: Request, ctx: Ctx, who: Caller) -> HTMLResponse:
    """The tenant's jobs, a page at a time; a bad filter is one line on the page, and a 400."""
    given = dict(request.query_params)
    try:
        query = parse_job_query(who.tenant, given)
    except InvalidInput as bad:
        return _jobs_page(who, given, JobQuery(who.tenant), [], None, str(bad), 400)
    page = ctx.ledger.read_models.job_page(query)
    return _jobs_page(who, given, query, page.rows, page.after, None, 200)


def _jobs_page(
    who: Principal,
    given: dict[str, str],
    query: JobQuery,
    rows: list[dict[str, Any]],
    after: int | None,
    problem: str | None,
    status: int,
) -> HTMLResponse:
    return _page(
        "jobs.html",
        status,
        who=who,
        given=given,
        query=query,
        jobs=rows,
        next_page=None if after is None else {**query.parameters(), "after": str(after)},
        first_page=query.parameters() if query.after else None,
        problem=problem,
        statuses=STATUSES,
        default_size=PAGE_SIZE,
        replayabilities=[r.value for r in Replayability],
    )


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(job_id: OwnedJobId, ctx: Ctx, who: Caller) -> HTMLResponse:
    read = ctx.ledger.personal_data.read_job(job_id, who.tenant, who.actor, HTTP_CHANNEL)
    events = read.shown_events()
    replays = ctx.ledger.governance.with_unanswered(
        r
        for r in ctx.ledger.read_models.rows(REPLAY_OUTCOMES)
        if (r["tenant"], r["job_id"]) == (who.tenant, job_id)
    )
    replays.sort(key=lambda r: int(r["attempt"]))
    log = ctx.ledger.jobs.reflective_log(job_id, tenant=who.tenant)
    return _page(
        "job.html",
        who=who,
        job_id=job_id,
        log=log,
        job_input=read.show(log.job_input),
        final_output=read.show(log.completion.final_output if log.completion else None),
        events=events,
        replays=replays,
        governance=ctx.ledger.governance.log(job_id, tenant=who.tenant),
    )


@router.get("/audits", response_class=HTMLResponse)
def audits_page(ctx: Ctx, who: Caller) -> HTMLResponse:
    """The tenant's batch audits, newest first, and what each found, by job status."""
    return _page("audits.html", who=who, audits=ctx.ledger.read_models.audit_records(who.tenant))


@router.get("/governance", response_class=HTMLResponse)
def governance_page(ctx: Ctx, who: Caller) -> HTMLResponse:
    """The governance log the tenant sees: requests, votes, approvals, results, halts, clears."""
    entries = ctx.ledger.governance.tenant_log(who.tenant)
    # The columns show scope, event, actor and time; the details, everything else.
    shown = [
        (entry, {k: v for k, v in entry.items() if k not in _GOVERNANCE_COLUMNS})
        for entry in reversed(entries)
    ]
    return _page("governance.html", who=who, entries=shown)


@router.get("/jobs/{job_id}/replays/{attempt}", response_class=HTMLResponse)
def replay_page(
    job_id: OwnedJobId, attempt: Annotated[int, Path(ge=1, le=2**31)], ctx: Ctx, who: Caller
) -> HTMLResponse:
    try:
        record = ctx.ledger.replays.record(job_id, attempt, tenant=who.tenant)
    except NotFoundError:
        raise not_found(f"replay {job_id}#{attempt}") from None
    shown = record.as_json()
    report = shown["report"]
    diffs = [] if report is None else report["divergences"]
    return _page(
        "replay.html",
        who=who,
        record=shown,
        verdict=None if report is None else verdict(report),
        diffs=[(d, side_by_side(d["recorded"], d["replayed"])) for d in diffs],
    )


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
    token = (form.get("token") or [""])[0].strip()
    principal: Principal | None = service(request).tokens.principal(token) if token else None
    if principal is None:
        return login_page("That token is not valid.", status=401)
    response = RedirectResponse("/dashboard", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/dashboard", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
