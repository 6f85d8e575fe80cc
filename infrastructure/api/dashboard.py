"""The operators' dashboard: server-rendered HTML, readable with JavaScript off.

It shows the caller's tenant: the replay evidence, jobs production replay cannot redo and what
each lacks, recent replays with their outcome, error code and authority, and halted snapshots;
the tenant's jobs, searched and paged in the store (`projections.job_search`: the filters are the
URL's query parameters, so a search can be bookmarked); each job links to its events (payloads
laid out as definition lists, personal data as the API shows it to the caller) and its
governance log, and each replay to its report, a divergence shown side by side; a recorded
what-if (``/dashboard/whatif/{record_id}``, the id ``mace`` and the API answer) is shown the
same way: one job's first change then the rest, or a batch's jobs, each changed job's first
change side by side; an as-of or a compare, its points, what was served, its data drift and what
follows from it side by side; a fork, its new job, what was kept, then original beside fork.
The audits page lists the tenant's batch audits and their totals; the governance page, every
governance event the tenant sees, newest first. Every page only reads.
A person signs in with a token from the tokens file, which opens a session (`application.sessions`):
the browser keeps the session's id, never the token, in a ``Secure``, ``HttpOnly``,
``SameSite=Strict`` cookie that only the dashboard's pages take. Its two forms post only from its
own pages (``Origin`` and ``Sec-Fetch-Site`` are checked), and signing out carries the session's
CSRF token.
"""

from __future__ import annotations

from pathlib import Path as FilePath
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from domain.canonical import canonical_json
from domain.errors import ErrorCode, InvalidInput, NotFoundError
from domain.whatif_record import AS_OF_KIND, COMPARE_KIND, FORK_KIND, WHATIF_BATCH_KIND
from infrastructure.api.context import (
    DASHBOARD,
    SESSION_COOKIE,
    Caller,
    Ctx,
    OwnedJobId,
    service,
)
from infrastructure.api.errors import ApiError, not_found, refusal
from infrastructure.api.metrics import tenant_evidence, tenant_replays
from infrastructure.api.whatif import WhatIfRecordId
from infrastructure.application.governance import ABANDONED
from infrastructure.application.personal_data import HTTP_CHANNEL
from infrastructure.application.tokens import Principal, TokenRefused, accepted, utc_text
from projections.as_of import point_label
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

router = APIRouter(prefix=DASHBOARD, include_in_schema=False)
RECENT = 50
_GOVERNANCE_COLUMNS = frozenset({"scope", "event", "actor_id", "recorded_at"})
_AS_OF_KINDS = frozenset({AS_OF_KIND, COMPARE_KIND})
TEMPLATES = Environment(
    loader=FileSystemLoader(FilePath(__file__).parent / "web" / "templates"),
    autoescape=select_autoescape(["html"]),
)
# A value as its canonical JSON, for a person: Jinja's own tojson writes ' as \u0027 (it is
# meant for scripts); autoescape makes this text safe in HTML.
TEMPLATES.filters["json"] = lambda value: canonical_json(value).decode()
TEMPLATES.filters["point"] = point_label


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


@router.get("/whatif/{record_id}", response_class=HTMLResponse)
def whatif_page(record_id: WhatIfRecordId, ctx: Ctx, who: Caller) -> HTMLResponse:
    """A recorded counterfactual as a diff: one job's what-if or a fork, its first change then
    the rest; a batch's jobs and each changed job's first change; an as-of or a compare, its
    data drift and what follows from it. Each value beside the one it is held to."""
    record = ctx.reader.whatif.shown(record_id, who.actor, tenant=who.tenant)
    report = record["report"]
    kind = record["kind"]
    # Each part's items (a batch's row, or a difference) beside the difference they show.
    parts: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]
    if kind == WHATIF_BATCH_KIND:
        parts = {
            "jobs": [(row, row["first_change"]) for row in report["jobs"] if row["first_change"]]
        }
    elif kind in _AS_OF_KINDS:
        parts = {part: [(d, d) for d in report[part]] for part in ("data_drift", "consequences")}
    else:
        parts = {"differences": [(d, d) for d in report.get("differences", [])]}
    # A compare holds what one point served beside what the other did; the rest, the recorded
    # value beside the re-decided one (a fork's: the original beside the fork).
    left, right = ("as_of", "compare_to") if kind == COMPARE_KIND else ("recorded", "replayed")
    diffs = {
        part: [(item, side_by_side(d[left], d[right])) for item, d in items]
        for part, items in parts.items()
    }
    return _page("whatif.html", who=who, record=record, diffs=diffs, labels=_labels(kind, report))


def _labels(kind: str, report: dict[str, Any]) -> tuple[str, str]:
    """The heads of a diff's two columns."""
    if kind == FORK_KIND:
        return "Original", "Fork"
    if kind == COMPARE_KIND:
        return (
            f"As of {point_label(report['as_of'])}",
            f"Compare to {point_label(report['compare_to'])}",
        )
    if kind == AS_OF_KIND:
        return "Recorded", f"As of {point_label(report['as_of'])}"
    return "Recorded", "Replayed"


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


def _same_site(request: Request) -> bool:
    """Whether a form post came from a page of this site: what a cross-site form cannot fake.

    Browsers say where a request came from in ``Sec-Fetch-Site`` and ``Origin``; each that is
    present must name this site (a tool that sends neither, as curl, is not a browser page)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in {"same-origin", "none"}:
        return False
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


async def _form(request: Request) -> dict[str, list[str]]:
    return parse_qs((await request.body()).decode("utf-8", errors="replace"))


def _cross_site() -> HTMLResponse:
    return error_page(refusal(ErrorCode.ACCESS_DENIED, "a form of another site cannot do this"))


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """Check the token, open a session for it, and give the browser the session's id."""
    if not _same_site(request):
        return _cross_site()
    token = ((await _form(request)).get("token") or [""])[0].strip()
    ctx = service(request)
    try:
        holder = accepted(ctx.tokens, token, ctx.sessions.clock())
    except TokenRefused as exc:
        when = exc.expired_at
        problem = (
            "That token is not valid."
            if when is None
            else f"That token expired at {utc_text(when)}."
        )
        return login_page(problem, 401)
    response = RedirectResponse(DASHBOARD, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        ctx.sessions.open(holder),
        max_age=ctx.settings.session_max_seconds,
        httponly=True,
        samesite="strict",
        secure=ctx.settings.session_cookie_secure,
        path="/",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session, if it is this site's form with the session's own CSRF token that asks."""
    ctx = service(request)
    session_id = request.cookies.get(SESSION_COOKIE)
    signed_in = ctx.sessions.find(session_id) if session_id else None
    if session_id and signed_in is not None:
        csrf_token = ((await _form(request)).get("csrf_token") or [""])[0]
        if not (_same_site(request) and signed_in.carries(csrf_token)):
            return _cross_site()
        ctx.sessions.close(session_id)
    response = RedirectResponse(DASHBOARD, status_code=303)
    response.delete_cookie(
        SESSION_COOKIE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=ctx.settings.session_cookie_secure,
    )
    return response
