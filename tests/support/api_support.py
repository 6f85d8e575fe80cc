"""What the HTTP service's tests share: callers in two tenants, a checked client, small readers.

Every response a test client receives passes two checks on its way back: a JSON body must be the
canonical bytes of what it says (``domain.canonical.canonical_json``), and the answer must be one
the service's OpenAPI document describes (`DocumentedAnswers`): its status and media type are
documented for the operation, and its body conforms to the schema documented for that status.
Error bodies are checked further by `assert_error`; Prometheus text by `parse_metrics`.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeAlias

import httpx
import httpx2
import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.core.failures import Failure, FailureGroup

from domain.canonical import canonical_json
from domain.events import hash_of
from domain.governance import Role
from domain.run_file import parse_run
from domain.snapshot import Snapshot, SnapshotKind
from infrastructure.api.app import create_app
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import default_snapshots
from infrastructure.application.tokens import TokenBook, TokenEntry
from infrastructure.storage.settings import Settings
from support.hand_written_runs import ANA, math_iteration, run_file, with_brainstates
from support.ledger_fixtures import settings_for, store_of

Response: TypeAlias = httpx.Response | httpx2.Response
"""An answer of the in-process ``TestClient`` (starlette's takes httpx2 once it is installed, as the
OpenAI Agents SDK's client installs it) or of a client of a live service (httpx)."""


@dataclass(frozen=True)
class Caller:
    token: str
    actor_id: str
    roles: tuple[str, ...]
    tenant: str

    @property
    def actor(self) -> dict[str, Any]:
        """How reports and answers name this caller."""
        return {"actor_id": self.actor_id, "roles": sorted(self.roles)}


CALLERS: dict[str, Caller] = {
    # Tenant "acme": one caller per role, and one holding admin and auditor.
    "operator": Caller("tok-acme-operator", "olga", ("operator",), "acme"),
    "admin": Caller("tok-acme-admin", "adam", ("admin",), "acme"),
    "auditor": Caller("tok-acme-auditor", "aude", ("auditor",), "acme"),
    "council": Caller("tok-acme-council", "cleo", ("council",), "acme"),
    "admin_auditor": Caller("tok-acme-admin-auditor", "ana", ("admin", "auditor"), "acme"),
    "admin_council": Caller("tok-acme-admin-council", "ada", ("admin", "council"), "acme"),
    # Tenant "beta": the same powers, another tenant.
    "beta_operator": Caller("tok-beta-operator", "bob", ("operator",), "beta"),
    "beta_admin_auditor": Caller("tok-beta-admin-auditor", "bea", ("admin", "auditor"), "beta"),
    "beta_council": Caller("tok-beta-council", "ben", ("council",), "beta"),
    # Tenant "default": where `mace ingest` and `mace run` record.
    "default_operator": Caller("tok-default-operator", "dan", ("operator",), "default"),
    # Acting for the whole store (store-wide halts): a store operator, and one on the council.
    "store_operator": Caller("tok-store-operator", "sol", ("store_operator",), "default"),
    "store_council": Caller("tok-store-council", "sue", ("council", "store_operator"), "default"),
}
SINGLE_ROLES = ("operator", "admin", "auditor", "council")


def token_book() -> TokenBook:
    return TokenBook(
        [
            TokenEntry(
                sha256=hashlib.sha256(c.token.encode()).hexdigest(),
                actor_id=c.actor_id,
                roles=[Role(r) for r in c.roles],
                tenant=c.tenant,
            )
            for c in CALLERS.values()
        ]
    )


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {CALLERS[who].token}"}


def _json_is_canonical(response: Response) -> None:
    response.read()
    if response.headers.get("content-type", "").startswith("application/json"):
        assert response.content == canonical_json(response.json()), response.content


class DocumentedAnswers:
    """The service's own OpenAPI document, held against the answers it gives.

    An answer to an operation of the document must have a status the operation documents, a
    media type documented for that status, and a body that conforms to the schema documented for
    it (schemathesis validates the body, as its ``response_schema_conformance`` check does).
    Requests that reach no operation of the document (the dashboard, the document itself, a path
    or method the service does not have) are not checked here.
    """

    def __init__(self, document: dict[str, Any]) -> None:
        self.schema = schemathesis.openapi.from_dict(document)

    def problems(self, response: Response) -> list[str]:
        request = response.request
        operation = self.schema.find_operation_by_path(request.method, request.url.path)
        if operation is None:
            return []
        status = response.status_code
        answered = f"{operation.label} answered {status}"
        documented = operation.definition.raw["responses"].get(str(status))
        if documented is None:
            return [f"{answered}, a status the document does not list for it"]
        media = response.headers.get("content-type", "").split(";")[0].strip()
        if media not in documented.get("content", {}):
            return [f"{answered} with {media!r}, a media type not documented for it"]
        failures: Sequence[Failure] = ()
        try:
            operation.validate_response(response)
        except FailureGroup as group:
            failures = group.exceptions
        except Failure as failure:
            failures = [failure]
        return [f"{answered}: {failure.title}: {failure.message}" for failure in failures]


@cache
def service_document() -> DocumentedAnswers:
    """The service's OpenAPI document, made once per test process (making it takes most of a
    second): every app `create_app` makes has the same one, as its routes and their answers do
    not depend on the settings or the ledger it is given."""
    app = create_app(settings_for("sqlite:///never-opened.db"), token_book())
    return DocumentedAnswers(app.openapi())


def checked_client(
    settings: Settings, ledger: Ledger, clock: Callable[[], float] = time.time
) -> TestClient:
    """A test client over the service on ``ledger`` (its wall clock: ``clock``); every JSON
    answer must be canonical, and every answer one the service's OpenAPI document describes."""
    client = TestClient(create_app(settings, token_book(), ledger, clock=clock))
    documented = service_document()

    def conforms(response: Response) -> None:
        response.read()
        problems = documented.problems(response)
        assert not problems, "\n".join(problems)

    client.event_hooks = {"request": [], "response": [_json_is_canonical, conforms]}
    return client


class Api:
    """The service as a caller sees it, and the store's position to tell what was written."""

    def __init__(self, client: TestClient, ledger: Ledger) -> None:
        self.client = client
        self.ledger = ledger

    def get(self, path: str, who: str | None = "operator") -> Response:
        response: Response = self.client.get(path, headers=auth(who) if who else {})
        return response

    def post(self, path: str, body: Any = None, who: str | None = "operator") -> Response:
        """POST ``body`` as JSON (no body when None) as the caller ``who`` (None: no token)."""
        headers = auth(who) if who else {}
        response: Response = (
            self.client.post(path, headers=headers)
            if body is None
            else self.client.post(path, json=body, headers=headers)
        )
        return response

    @contextmanager
    def unchecked(self) -> Iterator[TestClient]:
        """The client without the canonical-JSON check, for answers that are not the API's own."""
        hooks = self.client.event_hooks
        self.client.event_hooks = {"request": [], "response": []}
        try:
            yield self.client
        finally:
            self.client.event_hooks = hooks

    def position(self) -> int:
        """The store's last notification id: it moves whenever anything is written."""
        return store_of(self.ledger).recorder.max_notification_id() or 0

    # Use cases a test needs on the way to what it checks.

    def new_job(
        self, text: str = "2 + 3", seed: str = "s1", who: str = "operator", **extra: Any
    ) -> str:
        response = self.post("/v1/jobs", {"input": text, "seed": seed, **extra}, who)
        assert response.status_code == 201, response.content
        job_id = response.json()["job_id"]
        assert isinstance(job_id, str)
        return job_id

    def open_run(self, started: dict[str, Any], who: str = "operator") -> str:
        response = self.post("/v1/runs", started, who)
        assert response.status_code == 201, response.content
        run_id = response.json()["run_id"]
        assert isinstance(run_id, str)
        return run_id

    def send(self, run_id: str, items: list[dict[str, Any]], who: str = "operator") -> Response:
        return self.post(f"/v1/runs/{run_id}/events", {"events": items}, who)

    def replay(
        self, job_id: str, mode: str = "audit", who: str = "admin_auditor", **extra: Any
    ) -> Response:
        return self.post("/replay/request", {"job_id": job_id, "mode": mode, **extra}, who)

    def governance(self, job_id: str, who: str = "operator") -> list[dict[str, Any]]:
        response = self.get(f"/v1/jobs/{job_id}/governance", who)
        assert response.status_code == 200, response.content
        events = response.json()["events"]
        assert isinstance(events, list)
        return events


ANY_FIELD = "<any>"
"""For `assert_error`: a field must be named, whichever it is."""


def assert_error(
    response: Response,
    status: int,
    code: str,
    message: str | None = None,
    field: str | None = None,
) -> str:
    """The one error shape: exact status and code, a one-line message; returns the message."""
    assert response.status_code == status, response.content
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message"} | ({"field"} if field is not None else set()), error
    assert error["code"] == code
    text = error["message"]
    assert isinstance(text, str) and text and "\n" not in text and "\r" not in text
    if message is not None:
        assert text == message
    if field is not None and field != ANY_FIELD:
        assert error["field"] == field
    return text


NEVER_MATH = r"^never$"
"""A math rule's pattern no input matches: a math job then routes to the fallback agent."""


def stored_router(api: Api, math_pattern: str) -> str:
    """The default router with its math rule (R1) matching ``math_pattern``, stored; its id."""
    payload: dict[str, Any] = default_snapshots()[SnapshotKind.ROUTER].payload
    rules = [
        {**rule, "pattern": math_pattern} if rule["rule_id"] == "R1" else rule
        for rule in payload["rules"]
    ]
    snapshot, _ = api.ledger.snapshots.put(Snapshot.declare("router", {"rules": rules}))
    return snapshot.snapshot_id


@dataclass(frozen=True)
class Churned:
    """Memories that moved after a job's retrieval was served from them."""

    recorded: int
    """The log position right after the job was recorded."""
    added: str
    """The URI of the memory remembered since."""
    forgotten: str
    """The URI of a memory the job's retrieval served, forgotten since."""


def churned_launch(api: Api, tmp_path: Path) -> Churned:
    """Three of acme's episodes; job ``launch``, whose retrieval they served, recorded as ``mace
    ingest`` records it; then one memory remembered and one of those served forgotten."""
    remember = api.ledger.memories.remember_episode
    texts = ("the launch moved to friday", "lunch is at noon", "the launch needs a review")
    moved, lunch, review = (remember("acme", text, [], ANA, None) for text in texts)
    served = ((review, 2.0), (moved, 2.0), (lunch, 1.0))
    hits = [
        {
            "uri": f"mace://acme/memory/{memory.memory_id}",
            "score": score,
            "explain": {"rank": rank, "position": memory.position},
        }
        for rank, (memory, score) in enumerate(served, 1)
    ]
    query = "when is the launch"
    request = {"request_id": "r1", "query": query, "request_hash": hash_of(query)}
    body = [
        *math_iteration(0, "2 + 3", 5),
        {"type": "RetrievalRequest", **request, "memory_position": review.position},
        {"type": "RetrievalResponse", "request_id": "r1", "hits": hits},
    ]
    body[-1]["response_hash"] = hash_of(hits)
    ids = api.ledger.snapshots.default_ids()
    path = run_file(tmp_path, "launch", ids, with_brainstates(body), "2 + 3 = 5")
    api.ledger.run_imports.record_once(parse_run(Path(path).read_bytes().split(b"\n")), "acme")
    recorded = api.position()
    added = remember("acme", "the launch is on", [], ANA, None)
    api.ledger.memories.forget("acme", moved.memory_id, "moved again", ANA)
    uri = "mace://acme/memory/{}".format
    return Churned(recorded, uri(added.memory_id), uri(moved.memory_id))


def not_found_body(what: str) -> bytes:
    return canonical_json({"error": {"code": "NOT_FOUND", "message": f"no {what}"}})


def stage_event(event_id: str, stage: str = "plan") -> dict[str, Any]:
    """A batch item: the emitter's id and a small emitted event."""
    return {"event_id": event_id, "event": {"type": "StageTransition", "to_stage": stage}}


# --- Prometheus text format 0.0.4 ----------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_VALUE = r"NaN|[+-]Inf|[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
SAMPLE_LINE = re.compile(rf"^({_NAME})(?:\{{({_LABEL}(?:,{_LABEL})*)?\}})? ({_VALUE})$")
HELP_LINE = re.compile(rf"^# HELP ({_NAME}) (.*)$")
TYPE_LINE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")
LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Metrics:
    types: dict[str, str]
    samples: dict[tuple[str, Labels], float]

    def value(self, name: str, **labels: str) -> float:
        return self.samples[(name, tuple(sorted(labels.items())))]

    def family(self, name: str) -> dict[Labels, float]:
        return {labels: v for (n, labels), v in self.samples.items() if n == name}


def parse_metrics(text: str) -> Metrics:
    """Parse exposition text; every line must be a HELP, a TYPE or a sample of a typed family."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    helped: set[str] = set()
    samples: dict[tuple[str, Labels], float] = {}
    for line in text[:-1].split("\n"):
        if help_match := HELP_LINE.match(line):
            assert help_match.group(1) not in helped, line
            helped.add(help_match.group(1))
            continue
        if type_match := TYPE_LINE.match(line):
            assert type_match.group(1) not in types, line
            types[type_match.group(1)] = type_match.group(2)
            continue
        sample = SAMPLE_LINE.match(line)
        assert sample is not None, f"not a Prometheus text line: {line!r}"
        name, raw_labels, raw_value = sample.groups()
        assert name in types, f"sample before its # TYPE: {line!r}"
        labels = tuple(sorted(LABEL_PAIR.findall(raw_labels or "")))
        assert len({k for k, _ in labels}) == len(labels), line
        assert (name, labels) not in samples, f"sample repeated: {line!r}"
        samples[(name, labels)] = math.nan if raw_value == "NaN" else float(raw_value)
    assert helped == set(types)
    return Metrics(types, samples)


@pytest.fixture
def api(settings: Settings, ledger: Ledger) -> Iterator[Api]:
    """A checked client of the real app over the test's ledger (see `ledger_fixtures`)."""
    with checked_client(settings, ledger) as client:
        yield Api(client, ledger)
