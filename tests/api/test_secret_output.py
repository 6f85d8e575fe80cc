"""No token, session id or CSRF token in a repr, a dump, a log line, an error or an answer.

Settings, keyrings, checkpoint keys and store URLs have theirs (tests/storage/test_settings.py,
test_keyring.py, test_checkpoint_key.py, test_store_opening.py); these are the HTTP service's:
the tokens (the file's entries, the book, a token's holder), the dashboard's sessions, and what
the service logs and answers while a token and a cookie are presented, refused and used.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import UTC, datetime

import pytest
from support.api_support import CALLERS, Api, Response

from infrastructure.application.sessions import Sessions
from infrastructure.application.tokens import (
    TokenBook,
    TokenRefused,
    WatchedTokensFile,
    accepted,
    add_token,
    read_tokens_file,
)

FORM = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://testserver"}


def shown(*things: object) -> str:
    """Everything a holder shows of itself: repr, str, and (for a model) its dumps."""
    parts: list[str] = []
    for thing in things:
        parts += [repr(thing), str(thing)]
        dump = getattr(thing, "model_dump_json", None)
        if dump is not None:
            parts += [dump(), repr(thing.model_dump())]  # type: ignore[attr-defined]
    return "\n".join(parts)


def test_no_token_session_id_or_csrf_token_in_a_repr_or_dump(tmp_path: object) -> None:
    path = tmp_path / "tokens.json"  # type: ignore[operator]
    token = add_token(path, "olga", ["operator"], "acme", datetime(2031, 1, 1, tzinfo=UTC))
    book = TokenBook.load(path)
    watched = WatchedTokensFile(path, 0)
    holder = accepted(book, token, 0.0)
    (entry,) = read_tokens_file(path).tokens
    sessions = Sessions(watched, 3600, 7200)
    session_id = sessions.open(holder)
    signed_in = sessions.find(session_id)
    assert signed_in is not None
    seen = shown(book, watched, holder, entry, holder.principal, sessions, signed_in)
    seen += shown(*book._entries, *sessions._open.values())  # what they hold of each
    for secret in (token, session_id, signed_in.csrf_token):
        assert secret not in seen
    # The raw hash is what the file holds (useless to present); the holder does not show it.
    assert hashlib.sha256(token.encode()).hexdigest() not in shown(holder, signed_in, sessions)


def test_a_refusal_never_echoes_the_token(tmp_path: object) -> None:
    book = TokenBook([])
    with pytest.raises(TokenRefused) as refused:
        accepted(book, "mace_canary-token-never-shown", 0.0)
    assert "canary" not in str(refused.value) and "canary" not in repr(refused.value)


def test_no_token_or_cookie_reaches_a_log_line_an_error_or_an_answer(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """Tokens and cookies presented, refused and used, on every kind of answer the service
    gives them; the log at DEBUG, every logger. Only the sign-in's Set-Cookie carries the
    session id, and nothing ever carries the token."""
    token = CALLERS["operator"].token
    canary = "mace_canary-" + "x" * 40
    caplog.set_level(logging.DEBUG)
    answers: list[Response] = []
    with api.unchecked() as client:
        job_id = api.new_job()
        sign_in = client.post(
            "/dashboard/login", content=f"token={token}", headers=FORM, follow_redirects=False
        )
        session_id = sign_in.headers["set-cookie"].split(";")[0].split("=", 1)[1]
        cookie = {"Cookie": f"mace_session={session_id}"}
        page = client.get("/dashboard", headers=cookie)
        (csrf_token,) = re.findall(r'name="csrf_token" value="([^"]+)"', page.text)
        answers += [
            client.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}),
            client.get("/v1/jobs", headers={"Authorization": f"Bearer {canary}"}),
            client.post("/v1/audits", json={}, headers={"Cookie": f"mace_session={canary}"}),
            client.post("/v1/audits", json={}, headers=cookie),
            client.get("/dashboard", headers={"Cookie": f"mace_session={canary}"}),
            client.get(f"/dashboard/jobs/{job_id}", headers=cookie),
            client.post(
                "/dashboard/login", content=f"token={canary}", headers=FORM, follow_redirects=False
            ),
            client.post("/v1/jobs", content=b"{", headers={"Authorization": f"Bearer {token}"}),
            client.get("/readyz", headers={"Authorization": f"Bearer {token}"}),
            client.post(
                "/dashboard/logout",
                content=f"csrf_token={csrf_token}",
                headers={**FORM, **cookie},
                follow_redirects=False,
            ),
        ]
    told = caplog.text + "".join(
        f"{r.status_code} {dict(r.headers)!r} {r.text}" for r in [*answers, page]
    )
    for secret in (token, canary, session_id, hashlib.sha256(token.encode()).hexdigest()):
        assert secret not in told
    assert token not in str(dict(sign_in.headers)) and token not in sign_in.text
    # The CSRF token is in the dashboard's pages (their sign-out form), never a log or the API.
    api_answers = [
        r for r in answers if r.headers.get("content-type", "").startswith("application/json")
    ]
    assert csrf_token not in caplog.text and all(csrf_token not in r.text for r in api_answers)
