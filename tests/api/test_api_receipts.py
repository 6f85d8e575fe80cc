"""Memories, policy bundles, context/handoff receipts and their replay over HTTP, on both stores.

The real app over a real ledger (`api_support`); every JSON answer is checked to be canonical as it
arrives, "nothing written" is the store's notification position not moving, and tampering is done
by editing stored rows (`receipt_tampering`).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from support.api_support import (
    CALLERS,
    SINGLE_ROLES,
    Api,
    Response,
    assert_error,
    auth,
    checked_client,
    not_found_body,
)
from support.ledger_fixtures import TEST_SECRETS, settings_for
from support.receipt_examples import ALIAS_BOMB, BUNDLE
from support.receipt_tampering import edit_receipt, flip_memory_byte, refuse_new_receipts

from domain.canonical import canonical_json
from domain.context_assembly import REDACTED
from domain.governance import Actor
from domain.policy import MAX_BUNDLE_BYTES, parse_bundle
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

GHOST_RECEIPT = "rct-" + "0" * 32
GHOST_MEMORY = "mem-" + "0" * 32
ACCESS_DENIED = "ACCESS_DENIED"


def call(api: Api, method: str, path: str, body: Any = None, who: str | None = "operator") -> Any:
    """Any method, as ``who`` (None: no token), with ``body`` as JSON when given."""
    headers = auth(who) if who else {}
    kwargs: dict[str, Any] = {"headers": headers}
    if body is not None:
        kwargs["json"] = body
    return api.client.request(method, path, **kwargs)


def remember(api: Api, body: dict[str, Any], who: str = "operator") -> dict[str, Any]:
    response = api.post("/v1/memories", body, who)
    assert response.status_code == 201, response.content
    memory: dict[str, Any] = response.json()
    return memory


def fact(key: str, value: Any, labels: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"kind": "fact", "key": key, "value": value, "labels": labels or [], **extra}


def episode(text: str, labels: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"kind": "episode", "text": text, "labels": labels or [], **extra}


def emit(api: Api, query: str, who: str = "operator", **extra: Any) -> dict[str, Any]:
    response = api.post("/v1/context", {"query": query, **extra}, who)
    assert response.status_code == 200, response.content
    emitted: dict[str, Any] = response.json()
    return emitted


def replay(api: Api, receipt_id: str, memory: str | None = None, who: str = "auditor") -> Any:
    query = "" if memory is None else f"?memory={memory}"
    return api.post(f"/v1/receipts/{receipt_id}/replay{query}", None, who)


def receipt(api: Api, receipt_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/receipts/{receipt_id}")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()["receipt"]
    return body


@dataclass(frozen=True)
class Acme:
    """Tenant acme's memories, written over HTTP, under BUNDLE."""

    plan: str
    email: str
    medical: str
    billing: str


@pytest.fixture
def acme(api: Api) -> Acme:
    plan = remember(api, fact("user/customer/alice/plan", "gold"))
    email = remember(api, fact("user/customer/alice/email", "alice@example.com", ["pii"]))
    medical = remember(api, episode("alice asked about her plan renewal", ["medical"]))
    billing = remember(
        api, episode("alice disputed a plan invoice", ["billing"], origin={"job_id": "j-7"})
    )
    assert call(api, "PUT", "/v1/policy", {"bundle_yaml": BUNDLE}, "admin").status_code == 200
    return Acme(plan["memory_id"], email["memory_id"], medical["memory_id"], billing["memory_id"])


# --- the OpenAPI document -----------------------------------------------------------------------


def test_openapi_lists_the_routes_their_id_patterns_and_error_answers(api: Api) -> None:
    with api.unchecked() as client:
        paths = orjson.loads(client.get("/openapi.json").content)["paths"]
    expected = {
        "/v1/memories": {"get", "post"},
        "/v1/memories/{memory_id}/forget": {"post"},
        "/v1/policy": {"get", "put", "delete"},
        "/v1/context": {"post"},
        "/v1/handoff": {"post"},
        "/v1/receipts": {"get"},
        "/v1/receipts/{receipt_id}": {"get"},
        "/v1/receipts/{receipt_id}/verify": {"get"},
        "/v1/receipts/{receipt_id}/replay": {"post"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path
    patterns = {"receipt_id": r"^rct-[0-9a-f]{32}$", "memory_id": r"^(mem|epi)-[0-9a-f]{32}$"}
    for path, operations in paths.items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in patterns:
                    assert parameter["schema"]["pattern"] == patterns[parameter["name"]], path
    replay_answers = paths["/v1/receipts/{receipt_id}/replay"]["post"]["responses"]
    assert "unreplayable.nested_replay" in replay_answers["422"]["description"]
    assert {"401", "403", "404", "422"} <= set(replay_answers)
    get_answers = paths["/v1/receipts/{receipt_id}"]["get"]["responses"]
    assert "INTEGRITY_FAILURE" in get_answers["500"]["description"]
    assert "receipt" in get_answers["404"]["description"]


# --- 401 and 403 --------------------------------------------------------------------------------

ROUTES = [
    ("POST", "/v1/memories", episode("text")),
    ("GET", "/v1/memories", None),
    ("POST", f"/v1/memories/{GHOST_MEMORY}/forget", {"reason": "gone"}),
    ("PUT", "/v1/policy", {"bundle_yaml": BUNDLE}),
    ("GET", "/v1/policy", None),
    ("DELETE", "/v1/policy", None),
    ("POST", "/v1/context", {"query": "alice"}),
    ("POST", "/v1/handoff", {"query": "alice", "to_agent": "billing-bot"}),
    ("GET", "/v1/receipts", None),
    ("GET", f"/v1/receipts/{GHOST_RECEIPT}", None),
    ("GET", f"/v1/receipts/{GHOST_RECEIPT}/verify", None),
    ("POST", f"/v1/receipts/{GHOST_RECEIPT}/replay", None),
]


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "a bearer token is required"),
        ("Bearer not-a-known-token", "the bearer token is not valid"),
    ],
    ids=["no-token", "unknown-token"],
)
def test_every_route_needs_a_valid_token(
    api: Api, acme: Acme, authorization: str | None, message: str
) -> None:
    before = api.position()
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path, body in ROUTES:
        response = api.client.request(method, path, headers=headers, json=body)
        assert_error(response, 401, "UNAUTHENTICATED", message)
        assert response.headers["www-authenticate"] == "Bearer"
    assert api.position() == before


def _writes(api: Api, acme: Acme) -> dict[str, tuple[Callable[[str], Response], set[str]]]:
    """Each guarded endpoint: how to call it as someone (succeeding once allowed), who may."""
    receipt_id = emit(api, "alice plan")["receipt"]["receipt_id"]
    recorders = {"operator", "admin"}
    return {
        "remember": (lambda w: api.post("/v1/memories", episode("alice called"), w), recorders),
        "forget": (
            lambda w: api.post(f"/v1/memories/{acme.plan}/forget", {"reason": "left"}, w),
            recorders,
        ),
        "set-policy": (
            lambda w: call(api, "PUT", "/v1/policy", {"bundle_yaml": BUNDLE}, w),
            {"admin"},
        ),
        "clear-policy": (lambda w: call(api, "DELETE", "/v1/policy", None, w), {"admin"}),
        "replay": (lambda w: replay(api, receipt_id, who=w), {"auditor", "admin", "council"}),
    }


@pytest.mark.parametrize("endpoint", ["remember", "forget", "set-policy", "clear-policy", "replay"])
def test_guarded_endpoints_refuse_other_roles_with_403_and_write_nothing(
    api: Api, acme: Acme, endpoint: str
) -> None:
    attempt, allowed = _writes(api, acme)[endpoint]
    before = api.position()
    denied = [role for role in SINGLE_ROLES if role not in allowed]
    assert denied
    wanted = sorted(allowed)
    for who in denied:
        caller = CALLERS[who]
        message = (
            f"this needs one of the roles {wanted}; {caller.actor_id} holds {list(caller.roles)}"
        )
        assert_error(attempt(who), 403, ACCESS_DENIED, message)
    assert api.position() == before
    for who in sorted(allowed):
        response = attempt(who)
        assert response.status_code in {200, 201}, (who, response.content)
        if endpoint in {"forget", "clear-policy"}:
            break  # done once; doing it again is a 404
    assert api.position() > before


@pytest.mark.parametrize("who", SINGLE_ROLES)
def test_any_role_may_read_and_assemble(api: Api, acme: Acme, who: str) -> None:
    receipt_id = emit(api, "alice", who)["receipt"]["receipt_id"]
    handoff = api.post("/v1/handoff", {"query": "alice", "to_agent": "billing-bot"}, who)
    assert handoff.status_code == 200
    for path in (
        "/v1/memories",
        "/v1/policy",
        "/v1/receipts",
        f"/v1/receipts/{receipt_id}",
        f"/v1/receipts/{receipt_id}/verify",
    ):
        assert api.get(path, who).status_code == 200, path


# --- memories -----------------------------------------------------------------------------------


def test_memories_are_written_as_the_token_actor_and_listed_in_write_order(api: Api) -> None:
    before = api.position()
    origin = {"job_id": "j-7", "turn": 3}
    written = remember(
        api,
        fact("user/customer/alice/plan", {"tier": "gold"}, ["pii", "crm", "pii"], origin=origin),
    )
    assert set(written) == {
        "memory_id",
        "kind",
        "key",
        "content",
        "labels",
        "provenance",
        "position",
    }
    assert written["memory_id"].startswith("mem-") and len(written["memory_id"]) == 36
    assert (written["kind"], written["key"], written["content"]) == (
        "fact",
        "user/customer/alice/plan",
        {"tier": "gold"},
    )
    assert written["labels"] == ["crm", "pii"]
    assert written["provenance"]["actor"] == CALLERS["operator"].actor_id
    assert written["provenance"]["origin"] == origin
    assert api.position() > before

    told = remember(api, episode("alice phoned about her renewal"), "admin")
    assert told["memory_id"].startswith("epi-")
    assert (told["kind"], told["key"], told["labels"]) == ("episode", None, [])
    assert told["provenance"]["actor"] == CALLERS["admin"].actor_id
    assert told["provenance"]["origin"] is None

    # Written again under the same key, a fact supersedes the live one.
    newer = remember(api, fact("user/customer/alice/plan", "bronze"))
    listed = api.get("/v1/memories", "auditor").json()
    assert [m["memory_id"] for m in listed["memories"]] == [told["memory_id"], newer["memory_id"]]
    assert listed["memories"][1] == newer
    assert listed["log_position"] == newer["position"]
    assert api.get("/v1/memories", "beta_operator").json() == {"log_position": 0, "memories": []}


BAD_MEMORIES: dict[str, tuple[dict[str, Any], str, str | None]] = {
    "key-uppercase": (
        fact("user/Customer/a/plan", 1),
        "body.fact.key",
        "body.fact.key: invalid SEM key 'user/Customer/a/plan': rule S2:"
        " only a-z, 0-9, _ and / are allowed, found 'C'",
    ),
    "key-three-parts": (fact("user/a/plan", 1), "body.fact.key", None),
    "value-null": (
        fact("user/customer/a/plan", None),
        "body.fact.value",
        "body.fact.value: a SEM value must not be null:"
        " a missing fact is a miss (S9), not a stored null",
    ),
    "value-too-large": (fact("user/customer/a/plan", "x" * 5000), "body.fact.value", None),
    "value-beyond-64-bits": (fact("user/customer/a/plan", 2**70), "body.fact.value", None),
    "attribute-the-privacy-policy-denies": (
        fact("user/person/bob/password", "hunter2"),
        "body.fact.key",
        "body.fact.key: the privacy policy denies storing attribute 'password'",
    ),
    "label-uppercase": (
        episode("text", ["PII"]),
        "body.episode.labels",
        "body.episode.labels: label 'PII': expected 1-64 of lowercase letters, digits and . _ : -,"
        " starting with a letter or digit",
    ),
    "too-many-labels": (
        fact("user/customer/a/plan", 1, [f"l{n}" for n in range(17)]),
        "body.fact.labels",
        "body.fact.labels: labels: at most 16 labels, got 17",
    ),
    "label-not-text": (episode("text", [7]), "body.episode.labels.0", None),  # type: ignore[list-item]
    "text-blank": (
        episode("   "),
        "body.episode.text",
        "body.episode.text: episode: expected non-empty text",
    ),
    "text-too-long": (episode("a" * 4097), "body.episode.text", None),
    "unknown-kind": ({"kind": "note", "text": "x"}, "body", None),
    "no-kind": ({"text": "x"}, "body", None),
    "unknown-field": (episode("text", actor="mallory"), "body.episode.actor", None),
    "fact-without-key": ({"kind": "fact", "value": 1}, "body.fact.key", None),
}


@pytest.mark.parametrize("case", sorted(BAD_MEMORIES))
def test_bad_memory_writes_are_422_naming_the_field_and_write_nothing(api: Api, case: str) -> None:
    body, field, message = BAD_MEMORIES[case]
    before = api.position()
    response = api.post("/v1/memories", body)
    text = assert_error(response, 422, "INVALID_INPUT", message, field)
    assert text.startswith(f"{field}: ")
    assert api.position() == before
    assert api.get("/v1/memories").json() == {"log_position": 0, "memories": []}


def test_forget_tombstones_once_and_foreign_or_unknown_memories_are_404_alike(
    api: Api, acme: Acme
) -> None:
    before = api.position()
    foreign = api.post(f"/v1/memories/{acme.plan}/forget", {"reason": "left"}, "beta_operator")
    unknown = api.post(f"/v1/memories/{GHOST_MEMORY}/forget", {"reason": "left"}, "beta_operator")
    assert_error(foreign, 404, "NOT_FOUND", f"no memory {acme.plan}")
    assert foreign.content == not_found_body(f"memory {acme.plan}")
    assert foreign.content == unknown.content.replace(GHOST_MEMORY.encode(), acme.plan.encode())
    assert foreign.headers == unknown.headers
    assert api.position() == before

    done = api.post(f"/v1/memories/{acme.plan}/forget", {"reason": "left"})
    assert (done.status_code, done.json()) == (200, {"memory_id": acme.plan, "forgotten": True})
    live = [m["memory_id"] for m in api.get("/v1/memories").json()["memories"]]
    assert live == [acme.email, acme.medical, acme.billing]
    position = api.position()
    again = api.post(f"/v1/memories/{acme.plan}/forget", {"reason": "left"}, "admin")
    assert again.content == not_found_body(f"memory {acme.plan}")
    assert api.position() == position


def test_forget_answers_the_memory_and_refuses_bad_input(api: Api, acme: Acme) -> None:
    before = api.position()
    for path, body, field in [
        ("/v1/memories/mem-XYZ/forget", {"reason": "x"}, "path.memory_id"),
        (f"/v1/memories/{acme.email}/forget", {"reason": ""}, "body.reason"),
        (f"/v1/memories/{acme.email}/forget", {"reason": "two\nlines"}, "body.reason"),
        (f"/v1/memories/{acme.email}/forget", {}, "body.reason"),
        (f"/v1/memories/{acme.email}/forget", {"reason": "x", "by": "y"}, "body.by"),
    ]:
        assert_error(api.post(path, body), 422, "INVALID_INPUT", field=field)
    assert_error(
        api.post("/v1/memories/mem-XYZ/forget", {"reason": "x"}),
        422,
        "INVALID_INPUT",
        "path.memory_id: invalid memory id 'mem-XYZ':"
        " expected mem- or epi- and 32 lowercase hex digits",
        "path.memory_id",
    )
    assert api.position() == before
    done = api.post(f"/v1/memories/{acme.medical}/forget", {"reason": "asked to"}, "admin")
    assert (done.status_code, done.json()) == (200, {"memory_id": acme.medical, "forgotten": True})


# --- policy bundles -----------------------------------------------------------------------------


def test_policy_set_read_and_clear_with_the_global_fallback(api: Api, ledger: Ledger) -> None:
    assert api.get("/v1/policy").json() == {"in_force": None}
    put = call(api, "PUT", "/v1/policy", {"bundle_yaml": BUNDLE}, "admin")
    assert put.status_code == 200
    assert put.json() == {
        "scope": "tenant/acme",
        "bundle_hash": parse_bundle(BUNDLE).bundle_hash,
        "rules": 2,
    }
    own = {"scope": "tenant/acme", "bundle_hash": put.json()["bundle_hash"], "bundle_yaml": BUNDLE}
    assert api.get("/v1/policy", "auditor").json() == {"in_force": own}
    assert api.get("/v1/policy", "beta_operator").json() == {"in_force": None}

    fallback = "version: 1\nrules:\n- {id: x, when: {memory_label: secret}, action: deny}\n"
    ledger.policy.set_bundle(None, fallback, Actor.of("root", ["admin"]))  # the CLI's part
    global_view = {
        "scope": "global",
        "bundle_hash": parse_bundle(fallback).bundle_hash,
        "bundle_yaml": fallback,
    }
    assert api.get("/v1/policy", "beta_operator").json() == {"in_force": global_view}
    assert api.get("/v1/policy").json() == {"in_force": own}

    cleared = call(api, "DELETE", "/v1/policy", None, "admin")
    assert (cleared.status_code, cleared.json()) == (200, {"scope": "tenant/acme", "cleared": True})
    assert api.get("/v1/policy").json() == {"in_force": global_view}
    before = api.position()
    again = call(api, "DELETE", "/v1/policy", None, "admin")
    assert_error(again, 404, "NOT_FOUND", "no policy bundle is set for tenant/acme")
    assert api.position() == before


@pytest.mark.parametrize(
    ("bundle_yaml", "message"),
    [
        (
            "version: 1\nrules:\n- {id: a, when: {colour: red}, action: deny}\n",
            "rule 'a': unknown predicate 'colour'",
        ),
        ("version: 2\nrules: []\n", "version 2: only version 1 is understood"),
        ("version: [1", "not YAML: "),
        (
            "version: 1\nrules:\n- {id: a, when: {memory_label: x}, action: deny}\n"
            "- {id: a, when: {memory_label: y}, action: deny}\n",
            "rule 'a': the id is used by an earlier rule",
        ),
        (ALIAS_BOMB, "line 3: YAML anchors and aliases are not allowed in a policy bundle"),
        (
            "version: 1\nrules: []\n#" + "x" * MAX_BUNDLE_BYTES + "\n",
            f"a policy bundle is at most {MAX_BUNDLE_BYTES} bytes of YAML",
        ),
        (
            "version: 1\nrules: []\nmetadata: {since: 2026-13-45}\n",
            "holds a value YAML cannot read: month must be in 1..12",
        ),
    ],
    ids=[
        "unknown-predicate",
        "other-version",
        "not-yaml",
        "repeated-id",
        "alias-bomb",
        "too-big",
        "impossible-date",
    ],
)
def test_a_refused_bundle_is_422_with_the_policy_error_and_writes_nothing(
    api: Api, bundle_yaml: str, message: str
) -> None:
    before = api.position()
    response = call(api, "PUT", "/v1/policy", {"bundle_yaml": bundle_yaml}, "admin")
    text = assert_error(response, 422, "INVALID_INPUT", field="body.bundle_yaml")
    assert text.startswith(message), text
    assert api.position() == before
    assert api.get("/v1/policy").json() == {"in_force": None}


def test_policy_bodies_are_checked(api: Api) -> None:
    before = api.position()
    for body, field in [
        ({}, "body.bundle_yaml"),
        ({"bundle_yaml": 1}, "body.bundle_yaml"),
        ({"bundle_yaml": BUNDLE, "scope": "global"}, "body.scope"),
    ]:
        assert_error(
            call(api, "PUT", "/v1/policy", body, "admin"), 422, "INVALID_INPUT", None, field
        )
    assert api.position() == before


def test_a_bundle_with_a_list_as_a_key_is_refused_422(api: Api) -> None:
    response = call(api, "PUT", "/v1/policy", {"bundle_yaml": "{[1]: 2}"}, "admin")
    assert_error(response, 422, "INVALID_INPUT", field="body.bundle_yaml")


def test_a_deeply_nested_bundle_is_refused_422(api: Api) -> None:
    response = call(api, "PUT", "/v1/policy", {"bundle_yaml": "[" * 3000}, "admin")
    assert_error(response, 422, "INVALID_INPUT", field="body.bundle_yaml")


# --- context and handoff ------------------------------------------------------------------------


def test_context_is_assembled_for_the_token_caller_under_the_bundle_and_signed(
    api: Api, acme: Acme
) -> None:
    before = api.position()
    emitted = emit(api, "alice plan email")
    assert set(emitted) == {"receipt", "signature", "redacted"}
    body = emitted["receipt"]
    assert api.position() > before
    assert body["kind"] == "context" and body["mode"] == "live" and body["tenant"] == "acme"
    assert body["caller"] == {"id": "olga", "roles": ["operator"]}
    assert body["request"] == {"query": "alice plan email", "max_entries": 10}
    assert body["handoff"] is None and body["parent_receipt_id"] is None
    assert body["policy_snapshot"]["bundle_yaml"] == BUNDLE
    kept = {e["memory_id"]: e for e in body["entries"]}
    assert acme.medical not in kept
    assert kept[acme.email]["content"] == REDACTED
    assert kept[acme.plan]["content"] == "gold"
    assert [(f["rule_id"], f["memory_id"], f["action"]) for f in body["filters_applied"]] == [
        ("no-medical", acme.medical, "deny"),
        ("mask-pii", acme.email, "redact"),
    ]
    mac = hmac.new(TEST_SECRETS["k1"], canonical_json(body), "sha256").hexdigest()
    assert emitted["signature"] == mac
    assert api.get(f"/v1/receipts/{body['receipt_id']}").json() == emitted

    # An admin is not redacted by mask-pii: the caller is the token's, roles and all.
    as_admin = emit(api, "alice email", "admin")["receipt"]
    assert as_admin["caller"] == {"id": "adam", "roles": ["admin"]}
    assert next(e for e in as_admin["entries"] if e["memory_id"] == acme.email)["content"] == (
        "alice@example.com"
    )
    assert emit(api, "alice", max_entries=1)["receipt"]["entries"][0]["rank"] == 1
    assert emit(api, "alice", "beta_operator")["receipt"]["entries"] == []


def test_a_handoff_receipt_says_who_hands_to_whom(api: Api, acme: Acme) -> None:
    response = api.post(
        "/v1/handoff",
        {
            "query": "alice invoice",
            "max_entries": 5,
            "to_agent": "billing-bot",
            "from_agent": "support-bot",
            "note": "customer disputes an invoice",
        },
    )
    assert response.status_code == 200
    body = response.json()["receipt"]
    assert body["kind"] == "handoff"
    assert body["handoff"] == {
        "to_agent": "billing-bot",
        "from_agent": "support-bot",
        "note": "customer disputes an invoice",
    }
    assert body["request"] == {"query": "alice invoice", "max_entries": 5}
    bare = api.post("/v1/handoff", {"query": "alice", "to_agent": "billing-bot"}).json()
    assert bare["receipt"]["handoff"] == {
        "to_agent": "billing-bot",
        "from_agent": None,
        "note": None,
    }
    answer = replay(api, body["receipt_id"], "as_emitted").json()
    replayed = receipt(api, answer["replay_receipt_id"])
    assert (replayed["kind"], replayed["handoff"]) == ("handoff", body["handoff"])


BAD_ASKS: dict[str, tuple[str, dict[str, Any], str, str | None]] = {
    "query-blank": (
        "/v1/context",
        {"query": "   "},
        "body.query",
        "query: expected 1-2000 characters with at least one word",
    ),
    "query-no-word": (
        "/v1/context",
        {"query": "?!"},
        "body.query",
        "query: expected at least one word to match memories by",
    ),
    "query-missing": ("/v1/context", {}, "body.query", None),
    "query-too-long": ("/v1/context", {"query": "a " * 1001}, "body.query", None),
    "max-entries-zero": ("/v1/context", {"query": "a", "max_entries": 0}, "body.max_entries", None),
    "max-entries-101": (
        "/v1/context",
        {"query": "a", "max_entries": 101},
        "body.max_entries",
        None,
    ),
    "max-entries-text": (
        "/v1/context",
        {"query": "a", "max_entries": "5"},
        "body.max_entries",
        None,
    ),
    "max-entries-bool": (
        "/v1/context",
        {"query": "a", "max_entries": True},
        "body.max_entries",
        None,
    ),
    "unknown-field": ("/v1/context", {"query": "a", "caller": "root"}, "body.caller", None),
    "to-agent-missing": ("/v1/handoff", {"query": "a"}, "body.to_agent", None),
    "to-agent-space": (
        "/v1/handoff",
        {"query": "a", "to_agent": "billing bot"},
        "body.to_agent",
        "to_agent: 'billing bot' is not an agent id (1-128 of letters, digits and . _ @ : -)",
    ),
    "from-agent-bad": (
        "/v1/handoff",
        {"query": "a", "to_agent": "b", "from_agent": ""},
        "body.from_agent",
        "from_agent: '' is not an agent id (1-128 of letters, digits and . _ @ : -)",
    ),
    "note-two-lines": (
        "/v1/handoff",
        {"query": "a", "to_agent": "b", "note": "one\ntwo"},
        "body.note",
        "note: expected at most 500 printable characters on one line",
    ),
    "handoff-query-blank": (
        "/v1/handoff",
        {"query": " ", "to_agent": "b"},
        "body.query",
        "query: expected 1-2000 characters with at least one word",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ASKS))
def test_bad_context_and_handoff_asks_are_422_naming_the_field_and_emit_nothing(
    api: Api, acme: Acme, case: str
) -> None:
    path, body, field, message = BAD_ASKS[case]
    before = api.position()
    assert_error(api.post(path, body), 422, "INVALID_INPUT", message, field)
    assert api.position() == before
    assert api.get("/v1/receipts").json() == {"receipts": []}


# --- reading, listing and verifying receipts ----------------------------------------------------


def test_listing_is_in_emission_order_filtered_by_parent_and_paged(api: Api, acme: Acme) -> None:
    a = emit(api, "alice")["receipt"]["receipt_id"]
    b = emit(api, "plan")["receipt"]["receipt_id"]
    ra = replay(api, a).json()["replay_receipt_id"]
    rows = api.get("/v1/receipts", "council").json()["receipts"]
    assert [(r["number"], r["receipt_id"], r["parent_receipt_id"]) for r in rows] == [
        (0, a, None),
        (1, b, None),
        (2, ra, a),
    ]
    assert set(rows[0]) == {
        "number",
        "receipt_id",
        "parent_receipt_id",
        "kind",
        "mode",
        "emitted_at",
        "context_hash",
        "intact",
    }
    assert [r["mode"] for r in rows] == ["live", "live", "as_of_replay"]
    assert all(r["intact"] is True and r["kind"] == "context" for r in rows)
    assert rows[0]["context_hash"] == receipt(api, a)["context_hash"]
    by_parent = api.get(f"/v1/receipts?parent={a}").json()["receipts"]
    assert [r["receipt_id"] for r in by_parent] == [ra]
    assert api.get(f"/v1/receipts?parent={b}").json() == {"receipts": []}
    paged = api.get("/v1/receipts?after=0&limit=1").json()["receipts"]
    assert [r["receipt_id"] for r in paged] == [b]
    assert [r["receipt_id"] for r in api.get("/v1/receipts?after=1").json()["receipts"]] == [ra]
    assert api.get("/v1/receipts", "beta_operator").json() == {"receipts": []}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "query.limit"),
        ("limit=501", "query.limit"),
        ("after=-2", "query.after"),
        ("after=x", "query.after"),
        ("parent=rct-XYZ", "query.parent"),
    ],
)
def test_listing_refuses_bad_parameters(api: Api, query: str, field: str) -> None:
    assert_error(api.get(f"/v1/receipts?{query}"), 422, "INVALID_INPUT", field=field)


def test_a_foreign_receipt_answers_exactly_as_a_missing_one(api: Api, acme: Acme) -> None:
    receipt_id = emit(api, "alice plan")["receipt"]["receipt_id"]
    before = api.position()
    for method, template, who in [
        ("GET", "/v1/receipts/{id}", "beta_admin_auditor"),
        ("GET", "/v1/receipts/{id}/verify", "beta_admin_auditor"),
        ("POST", "/v1/receipts/{id}/replay", "beta_admin_auditor"),
        ("POST", "/v1/receipts/{id}/replay?memory=as_emitted", "beta_council"),
    ]:
        foreign = call(api, method, template.format(id=receipt_id), None, who)
        missing = call(api, method, template.format(id=GHOST_RECEIPT), None, who)
        assert_error(foreign, 404, "NOT_FOUND", f"no receipt {receipt_id}")
        assert foreign.content == not_found_body(f"receipt {receipt_id}")
        assert foreign.content == missing.content.replace(
            GHOST_RECEIPT.encode(), receipt_id.encode()
        ), template
        assert foreign.headers == missing.headers, template
    assert api.position() == before


@pytest.mark.parametrize(
    "path",
    ["/v1/receipts/{id}", "/v1/receipts/{id}/verify", "/v1/receipts/{id}/replay"],
)
def test_a_malformed_receipt_id_is_422_naming_the_path(api: Api, path: str) -> None:
    method = "POST" if path.endswith("replay") else "GET"
    response = call(api, method, path.format(id="rct-ABC"), None, "auditor")
    assert_error(
        response,
        422,
        "INVALID_INPUT",
        "path.receipt_id: invalid receipt id 'rct-ABC': expected rct- and 32 lowercase hex digits",
        "path.receipt_id",
    )


def test_verify_answers_ok_and_old_receipts_verify_after_key_rotation(
    api: Api, acme: Acme, settings: Settings
) -> None:
    old = emit(api, "alice")["receipt"]["receipt_id"]
    ok = {"valid": True, "key_id": "k1", "algorithm": "HMAC-SHA256", "reason": "ok"}
    assert api.get(f"/v1/receipts/{old}/verify").json() == ok

    rotated = settings_for(str(settings.store), "k1", "k2", active="k2")
    with Ledger.open(rotated) as later, checked_client(rotated, later) as client:
        after = Api(client, later)
        assert after.get(f"/v1/receipts/{old}/verify", "auditor").json() == ok
        newer = emit(after, "alice")
        assert newer["receipt"]["signature"] == {"algorithm": "HMAC-SHA256", "key_id": "k2"}
        mac = hmac.new(TEST_SECRETS["k2"], canonical_json(newer["receipt"]), "sha256").hexdigest()
        assert newer["signature"] == mac
        new_id = newer["receipt"]["receipt_id"]
        assert after.get(f"/v1/receipts/{new_id}/verify").json() == {**ok, "key_id": "k2"}
        assert after.get(f"/v1/receipts/{old}").json()["receipt"]["receipt_id"] == old
        assert replay(after, old).status_code == 200


# --- replay -------------------------------------------------------------------------------------


def test_a_replay_with_nothing_changed_is_an_empty_diff_and_a_linked_receipt(
    api: Api, acme: Acme
) -> None:
    original = emit(api, "alice plan email")["receipt"]
    before = api.position()
    response = replay(api, original["receipt_id"], who="council")
    assert response.status_code == 200
    answer = response.json()
    assert set(answer) == {"original_receipt_id", "replay_receipt_id", "diff", "redacted"}
    assert answer["original_receipt_id"] == original["receipt_id"]
    assert answer["diff"] == {
        "context_hash": {
            "original": original["context_hash"],
            "replay": original["context_hash"],
            "changed": False,
        },
        "selected_entries": {"added": [], "removed": [], "common": len(original["entries"])},
        "filters_applied": {"added": [], "removed": []},
    }
    assert api.position() > before
    replayed = receipt(api, answer["replay_receipt_id"])
    assert replayed["mode"] == "as_of_replay"
    assert replayed["parent_receipt_id"] == original["receipt_id"]
    assert replayed["replayed_by"] == {"id": "cleo", "roles": ["council"]}
    assert replayed["caller"] == original["caller"]
    assert replayed["memory"]["view"] == "current"
    assert receipt(api, original["receipt_id"]) == original  # never modified
    explicit = replay(api, original["receipt_id"], "current").json()
    assert explicit["diff"] == answer["diff"]


def test_data_drift_is_added_and_removed_the_live_bundle_does_not_matter_and_as_emitted_reproduces(
    api: Api, acme: Acme
) -> None:
    original = emit(api, "alice plan")["receipt"]
    rid = original["receipt_id"]
    assert acme.plan in {e["memory_id"] for e in original["entries"]}
    forgotten = api.post(f"/v1/memories/{acme.plan}/forget", {"reason": "customer left"})
    assert forgotten.status_code == 200
    added = remember(api, episode("alice plan cancelled"))
    assert call(api, "DELETE", "/v1/policy", None, "admin").status_code == 200
    memories_before = api.get("/v1/memories").json()

    current = replay(api, rid).json()["diff"]
    assert current["context_hash"]["changed"] is True
    assert [e["memory_id"] for e in current["selected_entries"]["added"]] == [added["memory_id"]]
    assert [e["memory_id"] for e in current["selected_entries"]["removed"]] == [acme.plan]
    # The frozen bundle still denies the medical episode: no policy drift without the live one.
    assert current["filters_applied"] == {"added": [], "removed": []}

    answer = replay(api, rid, "as_emitted", "admin_auditor").json()
    assert answer["diff"]["context_hash"] == {
        "original": original["context_hash"],
        "replay": original["context_hash"],
        "changed": False,
    }
    replayed = receipt(api, answer["replay_receipt_id"])
    assert replayed["context_hash"] == original["context_hash"]
    assert replayed["entries"] == original["entries"]
    assert replayed["filters_applied"] == original["filters_applied"]
    assert replayed["memory"] == {
        "log_position": original["memory"]["log_position"],
        "view": "as_emitted",
    }
    assert replayed["policy_snapshot"] == original["policy_snapshot"]
    assert api.get("/v1/memories").json() == memories_before  # replays wrote no memory


def test_a_replay_of_a_replay_is_422_nested_replay(api: Api, acme: Acme) -> None:
    rid = emit(api, "alice")["receipt"]["receipt_id"]
    first = replay(api, rid).json()["replay_receipt_id"]
    before = api.position()
    assert_error(
        replay(api, first),
        422,
        "unreplayable.nested_replay",
        f"the receipt is itself a replay of {rid}: replay that one",
    )
    assert api.position() == before


def test_an_unknown_memory_view_is_422_naming_query_memory(api: Api, acme: Acme) -> None:
    rid = emit(api, "alice")["receipt"]["receipt_id"]
    before = api.position()
    response = replay(api, rid, "as-emitted")
    assert_error(response, 422, "INVALID_INPUT", field="query.memory")
    assert api.position() == before


@pytest.fixture
def emitted(api: Api, acme: Acme) -> str:
    receipt_id: str = emit(api, "alice plan email")["receipt"]["receipt_id"]
    return receipt_id


def test_an_edited_key_id_is_invalid_not_unchecked(
    api: Api, settings: Settings, emitted: str
) -> None:
    # The row's own MAC is checked first: a key id the keyring lacks would answer valid null.
    edit_receipt(settings, emitted, lambda f: f["body"]["signature"].update(key_id="k9"))
    verdict = api.get(f"/v1/receipts/{emitted}/verify")
    assert (verdict.status_code, verdict.json()) == (
        200,
        {
            "valid": False,
            "key_id": "k9",
            "algorithm": "HMAC-SHA256",
            "reason": "record_mac_mismatch",
        },
    )


def test_an_edited_row_fails_verify_replay_and_read(
    api: Api, settings: Settings, emitted: str
) -> None:
    edit_receipt(settings, emitted, lambda f: f["body"]["entries"].pop())
    before = api.position()
    verdict = api.get(f"/v1/receipts/{emitted}/verify")
    assert (verdict.status_code, verdict.json()) == (
        200,
        {
            "valid": False,
            "key_id": "k1",
            "algorithm": "HMAC-SHA256",
            "reason": "record_mac_mismatch",
        },
    )
    assert_error(
        replay(api, emitted),
        422,
        "unreplayable.invalid_snapshot",
        "the policy snapshot is on a receipt whose signature does not verify (record_mac_mismatch)",
    )
    text = assert_error(api.get(f"/v1/receipts/{emitted}"), 500, "INTEGRITY_FAILURE")
    assert text.endswith(f"receipt {emitted}: MAC mismatch")
    # The receipt index is a read model of verified events: listing fails closed on the record.
    assert_error(api.get("/v1/receipts"), 500, "INTEGRITY_FAILURE")
    assert api.position() == before


def test_broken_yaml_in_the_row_is_422_invalid_snapshot(
    api: Api, settings: Settings, emitted: str
) -> None:
    def break_yaml(fields: dict[str, Any]) -> None:
        fields["body"]["policy_snapshot"]["bundle_yaml"] = "version: [1"

    edit_receipt(settings, emitted, break_yaml)
    before = api.position()
    text = assert_error(replay(api, emitted), 422, "unreplayable.invalid_snapshot")
    assert text.startswith("the policy snapshot does not load: not YAML: "), text
    assert api.position() == before


def test_a_receipt_without_a_snapshot_is_422_missing_policy_snapshot(
    api: Api, settings: Settings, emitted: str
) -> None:
    edit_receipt(settings, emitted, lambda f: f["body"].update(policy_snapshot=None))
    assert_error(
        replay(api, emitted, "as_emitted"),
        422,
        "unreplayable.missing_policy_snapshot",
        "the receipt captured no policy snapshot: which bundle applied cannot be known",
    )


def test_a_replay_whose_receipt_cannot_be_written_still_answers_200(
    api: Api, settings: Settings, emitted: str
) -> None:
    original = receipt(api, emitted)
    refuse_new_receipts(settings)
    before = api.position()
    response = replay(api, emitted)
    assert response.status_code == 200
    answer = response.json()
    assert answer["original_receipt_id"] == emitted
    assert answer["replay_receipt_id"] is None
    diff = answer["diff"]
    assert diff["context_hash"] == {
        "original": original["context_hash"],
        "replay": None,
        "changed": True,
    }
    removed = [e["memory_id"] for e in diff["selected_entries"]["removed"]]
    assert removed == sorted(e["memory_id"] for e in original["entries"])
    assert diff["selected_entries"]["added"] == [] and diff["selected_entries"]["common"] == 0
    assert api.position() == before
    assert [r["receipt_id"] for r in api.get("/v1/receipts").json()["receipts"]] == [emitted]


NOT_WRITTEN = (
    "the receipt was not written (the store refused it): this answer has no receipt id"
    " and no signature"
)


@pytest.mark.parametrize(
    "path, extra",
    [("/v1/context", {}), ("/v1/handoff", {"to_agent": "billing-bot"})],
    ids=["context", "handoff"],
)
def test_a_context_whose_receipt_cannot_be_written_is_still_served_200(
    api: Api, acme: Acme, settings: Settings, path: str, extra: dict[str, Any]
) -> None:
    ask = {"query": "alice plan email", **extra}
    written = api.post(path, ask).json()["receipt"]
    refuse_new_receipts(settings)
    before = api.position()

    response = api.post(path, ask)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert set(answer) == {"receipt", "signature", "warning", "redacted"}
    assert (answer["signature"], answer["warning"]) == (None, NOT_WRITTEN)
    served = answer["receipt"]
    assert (served["receipt_id"], served["signature"]) == (None, None)
    for key in ("kind", "handoff", "caller", "entries", "filters_applied", "context_hash"):
        assert served[key] == written[key], key
    assert api.position() == before
    listed = api.get("/v1/receipts").json()["receipts"]
    assert [r["receipt_id"] for r in listed] == [written["receipt_id"]]


def test_a_context_over_an_altered_memory_log_fails_closed_though_writes_fail_open(
    api: Api, acme: Acme, settings: Settings
) -> None:
    refuse_new_receipts(settings)
    flip_memory_byte(settings, "acme")
    assert_error(api.post("/v1/context", {"query": "alice plan"}), 500, "INTEGRITY_FAILURE")
