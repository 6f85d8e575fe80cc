"""The dashboard's cookie is a session of its own, never the bearer token, and never the JSON API's.

A person signs in on the dashboard with a token; the browser gets the id of a server-side session
(``Secure``, ``HttpOnly``, ``SameSite=Strict``, ``Path=/``, an expiry), which ends when it idles,
when it is old, at sign-out, and when its token is revoked or expires. A cross-site request from
another page the person has open carries that cookie: it must not write anything, on any route.
Tokens can expire: an expired one is refused (401 ``UNAUTHENTICATED``, saying so).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.api_support import CALLERS, Api, Response, assert_error

from domain.governance import Role
from infrastructure.api.app import create_app
from infrastructure.application.ledger import Ledger
from infrastructure.application.tokens import (
    TokenBook,
    TokenEntry,
    WatchedTokensFile,
    add_token,
    revoke_token,
    token_id_of,
)
from infrastructure.storage.settings import Settings

# What a page of another site sends when it makes the person's browser post here.
CROSS_SITE = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
SAME_SITE = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
WRITES = {"post", "put", "patch", "delete"}
NOW = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def sign_in(client: TestClient, token: str, headers: dict[str, str] = SAME_SITE) -> Response:
    response: Response = client.post(
        "/dashboard/login",
        content=f"token={token}",
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        follow_redirects=False,
    )
    return response


def session_cookie(response: Response) -> Any:
    """The ``mace_session`` cookie the response sets, with its attributes."""
    jar: SimpleCookie = SimpleCookie()
    for header in response.headers.get_list("set-cookie"):
        jar.load(header)
    return jar["mace_session"]


def with_cookie(session_id: str, **headers: str) -> dict[str, str]:
    return {"Cookie": f"mace_session={session_id}", **headers}


def path_values(job_id: str) -> dict[str, str]:
    """A value of each path parameter of the document that names something the tenant holds
    (or could): the attack must not stop at a 404 or a 422 before the token is asked for."""
    return {
        "job_id": job_id,
        "run_id": job_id,
        "attempt": "1",
        "snapshot_id": "0" * 64,
        "memory_id": "mem-" + "0" * 32,
        "receipt_id": "rct-" + "0" * 32,
        "number": "1",
        "reexecution_id": "0" * 32,
        "record_id": "0" * 16 + "-0",
    }


def test_the_session_cookie_authorises_no_route_of_the_json_api(api: Api) -> None:
    """The attack: a page of another site makes the operator's browser send each route of the
    OpenAPI document with the session cookie and no token. Every one is 401, nothing written."""
    job_id = api.new_job()
    api.ledger.checkpoints.write()  # the store as the CLI and the service's notary leave it
    signed_in = sign_in(api.client, CALLERS["admin_council"].token)
    assert signed_in.status_code == 303, signed_in.text
    session_id = session_cookie(signed_in).value
    document = api.client.get("/openapi.json").json()
    values = path_values(job_id)
    before = api.position()
    answered: dict[str, int] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "security" not in operation:
                continue  # /healthz, /readyz: open to all, write nothing
            url = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
            # A body the route would take from a caller with a token: {} (each route's own
            # checks come after the caller's, so no body gets further).
            body: dict[str, Any] = {"json": {}} if method in WRITES else {}
            response = api.client.request(
                method, url, headers=with_cookie(session_id, **CROSS_SITE), **body
            )
            answered[f"{method.upper()} {path}"] = response.status_code
            if response.status_code == 401:
                assert_error(response, 401, "UNAUTHENTICATED", "a bearer token is required")
    assert {route: status for route, status in answered.items() if status != 401} == {}
    writes = [route for route in answered if route.split()[0] in {"POST", "PUT", "DELETE"}]
    assert len(writes) >= 19 and {"POST /v1/audits", "POST /v1/jobs"} <= set(writes)
    assert api.position() == before
    # The same cookie still opens the dashboard: it is a session, just not the API's.
    assert api.client.get("/dashboard", headers=with_cookie(session_id)).status_code == 200


def test_signing_in_gives_a_session_cookie_that_is_not_the_token(api: Api) -> None:
    token = CALLERS["operator"].token
    response = sign_in(api.client, token)
    assert (response.status_code, response.headers["location"]) == (303, "/dashboard")
    cookie = session_cookie(response)
    assert token not in cookie.value and hashlib.sha256(token.encode()).hexdigest() not in (
        cookie.value
    )
    assert len(cookie.value) >= 43  # 256 bits, URL-safe base64
    assert cookie["secure"] and cookie["httponly"]
    assert (cookie["samesite"], cookie["path"], cookie["max-age"]) == ("strict", "/", "43200")
    page = api.client.get("/dashboard", headers=with_cookie(cookie.value))
    assert page.status_code == 200 and "olga · tenant acme" in page.text
    # Each sign-in is a session of its own; the token's own value is no session.
    assert session_cookie(sign_in(api.client, token)).value != cookie.value
    assert api.client.get("/dashboard", headers=with_cookie(token)).status_code == 401


def test_a_form_of_another_site_cannot_sign_in_or_out(api: Api) -> None:
    """Login CSRF (signing the person in as the attacker) and a forced sign-out are refused."""
    refused = sign_in(api.client, CALLERS["operator"].token, CROSS_SITE)
    assert refused.status_code == 403 and "ACCESS_DENIED" in refused.text
    assert "set-cookie" not in refused.headers
    other_origin = sign_in(api.client, CALLERS["operator"].token, {"Origin": "null"})
    assert other_origin.status_code == 403

    session_id = session_cookie(sign_in(api.client, CALLERS["operator"].token)).value
    page = api.client.get("/dashboard", headers=with_cookie(session_id)).text
    (csrf_token,) = re.findall(r'name="csrf_token" value="([^"]+)"', page)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for headers, content in (
        (CROSS_SITE, f"csrf_token={csrf_token}"),  # the right token, from another site
        (SAME_SITE, "csrf_token=forged"),
        (SAME_SITE, ""),
    ):
        forced = api.client.post(
            "/dashboard/logout",
            content=content,
            headers=with_cookie(session_id, **form, **headers),
            follow_redirects=False,
        )
        assert forced.status_code == 403, (headers, content)
        assert api.client.get("/dashboard", headers=with_cookie(session_id)).status_code == 200

    signed_out = api.client.post(
        "/dashboard/logout",
        content=f"csrf_token={csrf_token}",
        headers=with_cookie(session_id, **form, **SAME_SITE),
        follow_redirects=False,
    )
    assert signed_out.status_code == 303
    cleared = session_cookie(signed_out)
    assert (cleared.value, cleared["max-age"]) == ("", "0")
    ended = api.client.get("/dashboard", headers=with_cookie(session_id))
    assert ended.status_code == 401 and "the session has ended: sign in again" in ended.text


@pytest.fixture
def clock() -> list[float]:
    return [NOW.timestamp()]


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    return tmp_path / "tokens.json"


@pytest.fixture
def served(
    settings: Settings, ledger: Ledger, tokens_file: Path, clock: list[float]
) -> Iterator[Callable[[], TestClient]]:
    """A client of the service over the tokens file, on a wall clock the test moves."""
    clients: list[TestClient] = []

    def client() -> TestClient:
        tokens = WatchedTokensFile(tokens_file, 0)
        made = TestClient(create_app(settings, tokens, ledger, clock=lambda: clock[0]))
        clients.append(made.__enter__())
        return made

    yield client
    for made in clients:
        made.__exit__(None, None, None)


def test_a_session_ends_when_idle_when_old_and_when_its_token_goes(
    served: Callable[[], TestClient], tokens_file: Path, clock: list[float]
) -> None:
    olga = add_token(tokens_file, "olga", ["operator"], "acme")
    client = served()

    def session() -> str:
        return str(session_cookie(sign_in(client, olga)).value)

    def opens(session_id: str) -> bool:
        status: int = client.get("/dashboard", headers=with_cookie(session_id)).status_code
        return status == 200

    # Idle: 8 h without a request ends it; each request starts the 8 h again.
    used = session()
    clock[0] += 4 * 3600
    assert opens(used)
    clock[0] += 8 * 3600 - 1
    assert opens(used)
    idle = session()
    clock[0] += 8 * 3600
    assert not opens(idle)

    # Absolute: 12 h after sign-in, however busy.
    busy = session()
    for _ in range(6):
        clock[0] += 2 * 3600 - 1
        assert opens(busy)
    clock[0] += 6
    assert not opens(busy)

    # Revoked: the token's sessions end with it.
    kept = session()
    revoke_token(tokens_file, token_id_of(olga))
    assert not opens(kept)
    olga = add_token(tokens_file, "olga", ["operator"], "acme")
    assert opens(session())


def test_an_expired_token_is_refused_and_ends_its_sessions(
    served: Callable[[], TestClient], tokens_file: Path, clock: list[float]
) -> None:
    expires = NOW + timedelta(hours=1)
    olga = add_token(tokens_file, "olga", ["operator"], "acme", expires_at=expires)
    never = add_token(tokens_file, "ana", ["operator"], "acme")  # an entry without expiry
    client = served()
    assert client.get("/v1/jobs", headers={"Authorization": f"Bearer {olga}"}).status_code == 200
    session_id = session_cookie(sign_in(client, olga)).value

    clock[0] = expires.timestamp()
    refused = client.get("/v1/jobs", headers={"Authorization": f"Bearer {olga}"})
    assert_error(
        refused, 401, "UNAUTHENTICATED", "the bearer token expired at 2026-11-27T10:00:00Z"
    )
    assert refused.headers["www-authenticate"] == "Bearer"
    assert client.get("/dashboard", headers=with_cookie(session_id)).status_code == 401
    again = sign_in(client, olga)
    assert again.status_code == 401 and "That token expired at 2026-11-27T10:00:00Z." in again.text
    # /readyz takes an optional token: an expired one is as none.
    ready = client.get("/readyz", headers={"Authorization": f"Bearer {olga}"})
    assert "tokens" not in ready.json()

    clock[0] += 10 * 365 * 86400
    assert client.get("/v1/jobs", headers={"Authorization": f"Bearer {never}"}).status_code == 200


def test_a_tokens_file_without_expiry_is_read_and_rewritten_as_it_was(tokens_file: Path) -> None:
    """Files written before tokens could expire keep working, and keep their bytes when a new
    token is added beside their entries."""
    old = add_token(tokens_file, "olga", ["operator"], "acme")
    before = tokens_file.read_bytes()
    assert b"expires_at" not in before
    add_token(tokens_file, "ana", ["auditor"], "acme", expires_at=NOW + timedelta(days=30))
    after = tokens_file.read_bytes()
    assert (
        after.startswith(before.rstrip(b"]}\n")) and b'"expires_at":"2026-12-27T09:00:00Z"' in after
    )
    book = TokenBook.load(tokens_file)
    holder = book.holder(old)
    assert holder is not None and holder.expires_at is None


def test_the_token_book_tells_an_expired_token_from_a_valid_one() -> None:
    entry = TokenEntry(
        sha256=hashlib.sha256(b"tok-old").hexdigest(),
        actor_id="olga",
        roles=[Role.OPERATOR],
        tenant="acme",
        expires_at=NOW,
    )
    holder = TokenBook([entry]).holder("tok-old")
    assert holder is not None
    assert (holder.expired(NOW.timestamp() - 1), holder.expired(NOW.timestamp())) == (False, True)
