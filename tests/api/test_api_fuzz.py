"""Bounded schemathesis passes over the service's own OpenAPI document: in process on SQLite and
PostgreSQL, and over HTTP against a live ``mace serve`` on PostgreSQL.

The caller holds every role (operator, admin, auditor, council) for one tenant, so the
authenticated paths run; a few jobs, replays, an open run, a snapshot and an open re-execution
are stored first, and path parameters are drawn from those real ids as well as from whatever the
schema allows. The property, for every generated request, valid or deliberately invalid:

- no answer is a 5xx (the only one the service may give is 500 INTEGRITY_FAILURE, for tampered
  data, and nothing here tampers);
- every error answer is ``{"error": {"code", "message"}}`` (422 adds ``field``, a re-execution's
  409 ``REPLAY_DIVERGENCE`` adds ``divergence``), in canonical JSON;
- every answer is one the document describes (schemathesis' response conformance checks): its
  status is documented for the operation, its body conforms to the model documented for that
  status (every model forbids fields it does not name), its content type and headers are the
  documented ones; invalid data is refused; a secured operation refuses a call without its token.

One deviation is kept out of that property and pinned by a strict xfail below instead, so it
shows up on its own when fixed: the document does not say that an event's ``type`` is required
(``positive_data_acceptance``).

The property can fail: test_the_property_catches_a_server_error tampers with a stored job and
shows the very checks reporting its 500 INTEGRITY_FAILURE, and
test_the_checks_catch_a_body_its_model_does_not_describe shows them reporting a body that its
documented model does not describe. (An exception the app let escape would not even become a
response: the in-process transport raises it, failing the test too.)

Bounded: a few examples per operation (fewer over HTTP), a fixed derandomized seed, no deadline,
no example database, no shrinking.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args
from uuid import UUID

import pytest
import schemathesis
from fastapi import APIRouter
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis import checks as st_checks
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.parameters import ParameterLocation
from schemathesis.core.result import Ok
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.schemas import OpenApiSchema
from support.ledger_fixtures import RawTable, settings_for, store_of

import infrastructure.api as api_package
from domain.canonical import canonical_json
from domain.governance import Role
from domain.job import Job
from infrastructure.api.app import create_app
from infrastructure.api.errors import ERROR_ANSWERS
from infrastructure.api.response_models.operations import KeyState
from infrastructure.api.response_models.receipts import VerdictReason
from infrastructure.application.ledger import Ledger
from infrastructure.application.tokens import TokenBook, TokenEntry, TokensFile, token_hash
from infrastructure.storage.keys.receipt_signing import VerifyReason
from infrastructure.storage.records.key_checks import KeyStatus
from infrastructure.storage.settings import Settings
from infrastructure.tooling.load_server import ServiceProcess

TENANT = "acme"
TOKEN = "fuzz-token-acme-all-roles"
OTHER_TOKEN = "fuzz-token-globex-operator"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ALL_ROLES = ["operator", "admin", "auditor", "council"]
AnyCase = Case[Any]

EXAMPLES_PER_OPERATION = 25
LIVE_EXAMPLES_PER_OPERATION = 15
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    deadline=None,
    database=None,
    # Failures are collected, not raised, so there is nothing to shrink: keep the run bounded.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

# Over HTTP to a process of its own: fewer cases, each a real request (and some a replay).
LIVE_SETTINGS = settings(FUZZ_SETTINGS, max_examples=LIVE_EXAMPLES_PER_OPERATION)

# Schemathesis' own checks that hold here (the module docstring says which is left out).
CHECKS = [
    st_checks.not_a_server_error,
    st_checks.response_schema_conformance,
    st_checks.status_code_conformance,
    st_checks.content_type_conformance,
    st_checks.response_headers_conformance,
    st_checks.negative_data_rejection,
    st_checks.missing_required_header,
    st_checks.ignored_auth,
]

# A body over MACE_MAX_BODY_BYTES is refused 413, which schemathesis does not count as a refusal.
CONFIG = schemathesis.Config.from_dict(
    {
        "checks": {
            "negative_data_rejection": {
                "expected-statuses": [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
            }
        }
    }
)


def token_entry(token: str, actor: str, roles: list[str], tenant: str) -> TokenEntry:
    return TokenEntry(
        sha256=token_hash(token).hex(),
        actor_id=actor,
        roles=[Role(role) for role in roles],
        tenant=tenant,
    )


def token_entries() -> list[TokenEntry]:
    return [
        token_entry(TOKEN, "fuzz-ana", ALL_ROLES, TENANT),
        token_entry(OTHER_TOKEN, "gus", ["operator"], "globex"),
    ]


def token_book() -> TokenBook:
    return TokenBook(token_entries())


@dataclass
class KnownIds:
    """Ids that exist in the store (and one of another tenant), for path parameters to hit."""

    path_values: dict[str, list[Any]]
    jobs: list[str]


@dataclass
class FuzzTarget:
    schema: OpenApiSchema
    known: KnownIds
    statuses: dict[str, Counter[int]] = field(default_factory=dict)


def store_some_records(client: TestClient) -> KnownIds:
    """Jobs, replays, an open run, a snapshot, memories and receipts, stored through the API the
    fuzzer then calls."""
    other = {"Authorization": f"Bearer {OTHER_TOKEN}"}

    def post(path: str, body: dict[str, Any], headers: dict[str, str] = AUTH) -> Any:
        response = client.post(path, json=body, headers=headers)
        assert response.status_code in {200, 201}, response.text
        return response.json()

    first = post("/v1/jobs", {"input": "2 + 3", "seed": 1})
    unreplayable = {"input": "what is 7 * 6", "seed": "s2", "capture_mode": "prompts_only"}
    jobs = [first["job_id"], post("/v1/jobs", unreplayable)["job_id"]]
    for mode in ("audit", "reexecute"):
        post("/replay/request", {"job_id": jobs[0], "mode": mode})
    run = post("/v1/runs", {"type": "RunStarted", "seed": 7, "input": "open", "job_id": "run-open"})
    foreign = post("/v1/jobs", {"input": "2 + 3", "seed": 1}, headers=other)["job_id"]
    rule = {"rule_id": "R1", "pattern": "x", "agent": "generic_agent", "why": "fuzzed"}
    router = {"kind": "router", "payload": {"rules": [rule]}}
    snapshot = post("/v1/snapshots", router)["snapshot_id"]
    snapshots = [snapshot, *sorted(first["snapshot_ids"].values())]
    episode = {"kind": "episode", "text": "alice asked about her plan", "labels": ["crm"]}
    memories = [post("/v1/memories", episode)["memory_id"]]
    memories.append(post("/v1/memories", episode, headers=other)["memory_id"])
    receipts = [post("/v1/context", {"query": "alice plan"})["receipt"]["receipt_id"]]
    receipts.append(post("/v1/context", {"query": "alice"}, headers=other)["receipt"]["receipt_id"])
    reexecution = post("/v1/reexecutions", {"job_id": jobs[0]})["reexecution_id"]
    changes = {"changes": {"router": snapshot}}
    whatifs = [
        post("/v1/whatif", {"job_id": jobs[0], **changes})["record_id"],
        post("/v1/whatif/batch", changes)["record_id"],
        post("/v1/whatif/batch", changes, headers=other)["record_id"],
        "0123456789abcdef-1",  # free
    ]
    return KnownIds(
        path_values={
            "job_id": [*jobs, foreign, run["run_id"]],
            "run_id": [run["run_id"], jobs[0], foreign],
            "attempt": [1, 2, 3],
            "snapshot_id": snapshots,
            "memory_id": memories,
            "receipt_id": receipts,
            "number": [1, 2],  # checkpoint 1 is written below; 2 is not
            "reexecution_id": [reexecution, "0" * 32],
            "record_id": whatifs,
        },
        jobs=[*jobs, foreign],
    )


@pytest.fixture
def fuzz_target(settings: Settings, ledger: Ledger) -> Iterator[FuzzTarget]:
    app = create_app(settings, token_book(), ledger)
    with TestClient(app) as client:
        known = store_some_records(client)
    ledger.checkpoints.write()
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
    try:
        yield FuzzTarget(schema=schema, known=known)
    finally:
        # Schemathesis keeps an app's lifespan running for the process; end ours with its ledger.
        shutdown_lifespans()


def cases_for(operation: Any, known: KnownIds) -> st.SearchStrategy[AnyCase]:
    """Positive and negative cases, some with path parameters (or a body job id) that exist."""
    choices = [operation.as_strategy(mode) for mode in GenerationMode]
    names = re.findall(r"\{(\w+)\}", operation.path)
    if names:
        real = st.fixed_dictionaries({n: st.sampled_from(known.path_values[n]) for n in names})
        choices.append(real.flatmap(lambda ids: operation.as_strategy(path_parameters=ids)))
    if operation.path in {"/replay/request", "/v1/reexecutions", "/v1/whatif"}:
        choices.append(
            st.tuples(
                operation.as_strategy(GenerationMode.POSITIVE), st.sampled_from(known.jobs)
            ).map(with_job_id)
        )
    return st.one_of(choices)


def with_job_id(drawn: tuple[AnyCase, str]) -> AnyCase:
    case, job_id = drawn
    if isinstance(case.body, dict):
        case.body["job_id"] = job_id
    return case


def credentials(case: AnyCase) -> dict[str, str]:
    """The real token, unless this case is about a missing or malformed Authorization header.

    Schemathesis fills the Bearer header with made-up tokens; a case whose header it left well
    formed is sent with the real token instead, so the operation's own code runs.
    """
    header = case.headers.get("Authorization") if case.headers else None
    if not isinstance(header, str) or not header.startswith("Bearer "):
        return {}
    meta = case.meta
    if meta is not None and meta.is_negative_at(ParameterLocation.HEADER):
        return {}
    return AUTH


def answer_problems(
    case: AnyCase, response: schemathesis.Response, sent: dict[str, str]
) -> list[str]:
    """What is wrong with this answer: schemathesis' checks, then the service's own rules."""
    problems: list[str] = []
    failures: Sequence[Failure] = ()
    try:
        case.validate_response(
            response, checks=CHECKS, headers=sent, transport_kwargs={"headers": sent}
        )
    except FailureGroup as group:
        failures = group.exceptions
    except Failure as failure:
        failures = [failure]
    problems += [f"{failure.title}: {failure.message}" for failure in failures]
    status = response.status_code
    if status >= 500:
        problems.append(f"{status} answered: {response.content[:300]!r}")
    media = response.headers.get("content-type", [""])[0]
    if not media.startswith("application/json"):
        if status >= 400:
            problems.append(f"{status} answered with {media!r}, not a JSON error body")
        return problems
    body = response.json()
    if response.content != canonical_json(body):
        problems.append(f"{status} body is not canonical JSON: {response.content[:300]!r}")
    if status >= 400:
        problems += error_shape_problems(case, status, body)
    if status == 401 and response.headers.get("www-authenticate") != ["Bearer"]:
        problems.append("401 without WWW-Authenticate: Bearer")
    return problems


def error_shape_problems(case: AnyCase, status: int, body: Any) -> list[str]:
    error = body.get("error") if isinstance(body, dict) else None
    well_formed = (
        isinstance(error, dict)
        and isinstance(error.get("code"), str)
        and isinstance(error.get("message"), str)
        and "\n" not in error["message"]
        and set(error) <= {"code", "message", "field", "divergence"}
        and ("field" not in error or status == 422)
        # A re-execution's call that left its recording carries the canonical diff.
        and ("divergence" not in error or error["code"] == "REPLAY_DIVERGENCE")
    )
    # POST /replay/request answers a refused replay 403 with its whole report beside "error".
    whole_report = case.operation.path == "/replay/request" and status == 403
    if not well_formed or (set(body) != {"error"} and not whole_report):
        return [f"{status} error body has the wrong shape: {canonical_json(body)[:300]!r}"]
    return []


def exercise(
    target: FuzzTarget, operation: Any, problems: dict[str, list[str]], examples: settings
) -> None:
    seen = target.statuses.setdefault(operation.label, Counter())

    @examples
    @given(case=cases_for(operation, target.known))
    def one_case(case: AnyCase) -> None:
        sent = credentials(case)
        response = case.call(headers=sent)
        seen[response.status_code] += 1
        for problem in answer_problems(case, response, sent):
            found = problems.setdefault(operation.label, [])
            if len(found) < 5:
                curl = case.as_curl_command(headers=sent)
                found.append(f"{problem[:800]}\n    reproduce: {curl[:800]}")

    one_case()


# Operations whose own code must have answered (200 or 201) at least once in every pass.
ANSWERED_OK = (
    "GET /healthz",
    "GET /readyz",
    "GET /v1/jobs",
    "GET /v1/jobs/{job_id}",
    "GET /v1/jobs/{job_id}/events",
    "GET /v1/jobs/{job_id}/replays/{attempt}",
    "GET /v1/jobs/{job_id}/governance",
    "GET /v1/runs/{run_id}",
    "GET /v1/snapshots/{snapshot_id}",
    "POST /replay/request",
    "POST /v1/jobs",
    "POST /v1/snapshots",
    "GET /metrics",
    "GET /v1/memories",
    "GET /v1/policy",
    "GET /v1/receipts",
    "GET /v1/receipts/{receipt_id}",
    "GET /v1/receipts/{receipt_id}/verify",
    "POST /v1/receipts/{receipt_id}/replay",
    "GET /v1/checkpoints/public-key",
    "GET /v1/personal-data/reads",
)


def fuzz_every_operation(
    target: FuzzTarget, examples: settings, answered_ok: tuple[str, ...] = ANSWERED_OK
) -> None:
    """Every operation of the document, ``examples`` cases each: fails with everything found
    wrong, or unless the operations ``answered_ok`` names answered 200 or 201 (the token worked
    and real ids were hit, so the operations' own code ran)."""
    problems: dict[str, list[str]] = {}
    operations = []
    for result in target.schema.get_all_operations():
        assert isinstance(result, Ok), result
        operations.append(result.ok())
    assert len(operations) >= 20, [op.label for op in operations]
    for operation in operations:
        exercise(target, operation, problems, examples)

    for label, counts in sorted(target.statuses.items()):
        print(f"{label}: {dict(sorted(counts.items()))}")  # noqa: T201
    report = "\n".join(f"{label}:\n  " + "\n  ".join(found) for label, found in problems.items())
    assert not problems, report
    answered = {label for label, counts in target.statuses.items() if counts[200] + counts[201]}
    for label in answered_ok:
        assert label in answered, (label, target.statuses.get(label))


def test_fuzzed_requests_get_no_server_error_and_documented_answers(
    fuzz_target: FuzzTarget,
) -> None:
    fuzz_every_operation(fuzz_target, FUZZ_SETTINGS)


@pytest.fixture
def live_target(postgres_url: str, tmp_path: Path) -> Iterator[FuzzTarget]:
    """``mace serve`` in its own process, with a tokens file, on a PostgreSQL store that holds
    the records the passes draw ids from and a checkpoint over them."""
    settings = settings_for(postgres_url)
    with (
        Ledger.open(settings) as ledger,
        TestClient(create_app(settings, token_book(), ledger)) as client,
    ):
        known = store_some_records(client)
    # The ledger checkpointed the store as it closed: /v1/checkpoints/newest has one to answer.
    tokens = tmp_path / "tokens.json"
    tokens.write_bytes(canonical_json(TokensFile(tokens=token_entries()).model_dump(mode="json")))
    tokens.chmod(0o600)
    log = tmp_path / "serve.log"
    with ServiceProcess(settings, tokens, log) as service:
        service.start()
        schema = schemathesis.openapi.from_url(f"{service.base_url}/openapi.json", config=CONFIG)
        yield FuzzTarget(schema=schema, known=known)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def test_a_live_service_on_postgresql_answers_as_its_document_says(
    live_target: FuzzTarget,
) -> None:
    fuzz_every_operation(
        live_target,
        LIVE_SETTINGS,
        (
            # A snapshot body the generator makes valid is rare: in fifteen cases it was seen
            # answered only 422 in one CI-like run. Its 201 is held to the document in the
            # in-process pass (twenty-five cases) and by every test client answer.
            *(operation for operation in ANSWERED_OK if operation != "POST /v1/snapshots"),
            "POST /v1/audits",
            "GET /v1/checkpoints/newest",
            "GET /v1/checkpoints/{number}",
            "POST /v1/checkpoints/verify",
        ),
    )


def test_the_property_catches_a_server_error(
    settings: Settings, ledger: Ledger, raw_table: RawTable
) -> None:
    """The checks above fail on a 5xx: a tampered job answers 500 INTEGRITY_FAILURE, reported."""
    app = create_app(settings, token_book(), ledger)
    with TestClient(app) as client:
        job_id = client.post("/v1/jobs", json={"input": "2 + 3", "seed": 1}, headers=AUTH).json()[
            "job_id"
        ]
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
    try:
        operation = schema["/v1/jobs/{job_id}"]["GET"]
        case = operation.Case(path_parameters={"job_id": job_id})
        assert answer_problems(case, case.call(headers=AUTH), AUTH) == []
        flip_a_byte(raw_table, Job.id_in(TENANT, job_id), version=2)
        response = case.call(headers=AUTH)
        problems = answer_problems(case, response, AUTH)
    finally:
        shutdown_lifespans()
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "INTEGRITY_FAILURE"
    assert any(p.startswith("Server error") for p in problems), problems
    assert any(p.startswith("500 answered") for p in problems), problems


def test_the_checks_catch_a_body_its_model_does_not_describe(
    settings: Settings, ledger: Ledger
) -> None:
    """The same answer, held to a document whose model says a run's event count is a string,
    fails the checks above: response_schema_conformance validates the body against the model."""
    app = create_app(settings, token_book(), ledger)
    started = {"type": "RunStarted", "seed": 7, "input": "open", "job_id": "run-checked"}
    with TestClient(app) as client:
        assert client.post("/v1/runs", json=started, headers=AUTH).status_code == 201
    found: dict[str, list[str]] = {}
    try:
        for events in ("integer", "string"):
            # The app keeps the document it made; this edits what /openapi.json answers.
            app.openapi()["components"]["schemas"]["RunState"]["properties"]["events"] = {
                "type": events
            }
            schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
            case = schema["/v1/runs/{run_id}"]["GET"].Case(
                path_parameters={"run_id": "run-checked"}
            )
            found[events] = answer_problems(case, case.call(headers=AUTH), AUTH)
    finally:
        shutdown_lifespans()
    assert found["integer"] == []
    assert any(
        p.startswith("Response violates schema") and "is not of type" in p for p in found["string"]
    ), found


def flip_a_byte(table: RawTable, stream: UUID, version: int) -> None:
    state = bytearray(table.state(stream, version))
    state[-3] ^= 0x01
    table.set_column(stream, version, "state", bytes(state))


# --- deviations schemathesis found, pinned until fixed ------------------------------------------

STARLETTE_ERRORS: dict[str, Callable[[TestClient], Any]] = {
    "json-body-not-utf8": lambda c: c.post(
        "/v1/jobs", content=b"\xbe", headers={**AUTH, "Content-Type": "application/json"}
    ),
    "unknown-path": lambda c: c.get("/v1/nothing-here", headers=AUTH),
    "wrong-method": lambda c: c.delete("/v1/jobs", headers=AUTH),
}


@pytest.mark.parametrize("request_kind", sorted(STARLETTE_ERRORS))
def test_starlette_errors_answer_in_the_error_shape(
    settings: Settings, ledger: Ledger, request_kind: str
) -> None:
    before = store_of(ledger).recorder.max_notification_id()
    with TestClient(create_app(settings, token_book(), ledger)) as client:
        response = STARLETTE_ERRORS[request_kind](client)
    # A body the framework cannot parse is bad input (422), like any other.
    assert response.status_code in {404, 405, 422}
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]) <= {"code", "message", "field"}
    assert response.content == canonical_json(body)
    assert store_of(ledger).recorder.max_notification_id() == before


def openapi_document(tmp_path: Path) -> dict[str, Any]:
    """The document alone: no lifespan runs, so no store is opened."""
    app = create_app(settings_for(f"sqlite:///{tmp_path}/unused.db"), token_book())
    document = TestClient(app).get("/openapi.json").json()
    assert isinstance(document, dict)
    return document


def schema_routes() -> set[str]:
    """Every route of the service's routers that belongs in the document, as ``METHOD path``."""
    found: set[str] = set()
    for module in pkgutil.iter_modules(api_package.__path__):
        router = getattr(
            importlib.import_module(f"{api_package.__name__}.{module.name}"), "router", None
        )
        if not isinstance(router, APIRouter):
            continue
        for route in router.routes:
            if isinstance(route, APIRoute) and route.include_in_schema:
                found.update(f"{method} {route.path}" for method in route.methods or ())
    return found


def open_objects(node: Any, where: str) -> Iterator[str]:
    """Where a schema allows an object of any shape (``dict[str, Any]``): properties not listed
    and not forbidden, or values of any kind under names of any kind."""
    if isinstance(node, dict):
        if node.get("type") == "object":
            extra = node.get("additionalProperties", True)
            if extra is True or (not node.get("properties") and extra == {}):
                yield where
        for key, value in node.items():
            yield from open_objects(value, f"{where}/{key}")
    elif isinstance(node, list):
        for position, value in enumerate(node):
            yield from open_objects(value, f"{where}/{position}")


def test_openapi_describes_the_body_of_every_answer(tmp_path: Path) -> None:
    """Every route is in the document; every operation documents a success (200 or 201) and the
    error statuses of the error table, each with the schema of its body: a model of the
    service's own for JSON (the error body for errors; a refused replay's 403 is the replay
    answer), a string for text. No response model holds an object of unknown shape."""
    document = openapi_document(tmp_path)
    schemas = document["components"]["schemas"]
    operations = {
        f"{method.upper()} {path}": operation
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    assert set(operations) == schema_routes()
    error_statuses = {str(status) for status in ERROR_ANSWERS}
    models: set[str] = set()
    for label, operation in operations.items():
        responses = operation["responses"]
        assert {"200", "201"} & set(responses), f"{label}: no success documented"
        assert error_statuses <= set(responses), f"{label}: {error_statuses - set(responses)}"
        for status, answer in responses.items():
            content = answer.get("content", {})
            assert "application/json" in content or status == "200", f"{label} {status}"
            for media, described in content.items():
                schema = described.get("schema")
                if media != "application/json":
                    assert schema == {"type": "string"}, f"{label} {status} {media}: {schema}"
                    continue
                assert set(schema) == {"$ref"}, f"{label} {status}: {schema}"
                model = schema["$ref"].removeprefix("#/components/schemas/")
                if int(status) >= 400:
                    refused_replay = (label, status) == ("POST /replay/request", "403")
                    assert model == ("ReplayAnswer" if refused_replay else "ErrorBody"), label
                assert schemas[model]["additionalProperties"] is False, f"{label} {status}"
                models.add(model)
    reached = reachable(models, schemas)
    assert {"ErrorBody", "ReplayReport", "Checkpoint", "MissingArtifact"} <= reached
    assert [where for name in sorted(reached) for where in open_objects(schemas[name], name)] == []


def test_the_documented_key_states_and_verify_reasons_are_the_stores_own() -> None:
    """The entry points may not import the store, so two of its enumerations are spelled again
    in the response models: held here to the store's own."""
    assert set(get_args(KeyState)) == {status.value for status in KeyStatus}
    assert set(get_args(VerdictReason)) == {reason.value for reason in VerifyReason}


def reachable(names: set[str], schemas: dict[str, Any]) -> set[str]:
    """The named schemas and every schema they refer to, however deep."""
    seen: set[str] = set()
    waiting = list(names)
    while waiting:
        name = waiting.pop()
        if name not in seen:
            seen.add(name)
            text = canonical_json(schemas[name]).decode()
            waiting += re.findall(r'"#/components/schemas/([^"]+)"', text)
    return seen


def test_openapi_documents_the_error_answers(tmp_path: Path) -> None:
    document = openapi_document(tmp_path)
    schemas = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            if operation.get("security"):
                assert "401" in responses, f"{method.upper()} {path}: 401 undocumented"
            if "422" in responses:
                ref = responses["422"]["content"]["application/json"]["schema"]["$ref"]
                documented = schemas[ref.rsplit("/", 1)[-1]]
                assert "error" in documented.get("properties", {}), f"{method.upper()} {path}: 422"


def test_openapi_documents_which_ids_a_path_accepts(tmp_path: Path) -> None:
    document = openapi_document(tmp_path)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in {"job_id", "snapshot_id"}:
                    assert "pattern" in parameter["schema"], f"{method.upper()} {path}"


@pytest.mark.xfail(
    strict=True,
    reason="OpenAPI gap: the run events' discriminator 'type' has a default, so it is not listed"
    " as required, yet an event without it is refused 422 'Unable to extract tag using"
    " discriminator' (schemathesis positive_data_acceptance: 'Schema-valid request rejected')",
)
def test_openapi_requires_the_event_type_it_discriminates_on(tmp_path: Path) -> None:
    schemas = openapi_document(tmp_path)["components"]["schemas"]
    event = schemas["BatchItem"]["properties"]["event"]
    assert event["discriminator"]["propertyName"] == "type"
    for choice in event["oneOf"]:
        name = choice["$ref"].rsplit("/", 1)[-1]
        assert "type" in schemas[name].get("required", []), name
