"""The dashboard's sign-in sessions: what its cookie names, instead of the token itself.

Signing in with a token opens a session: a random id (256 bits from `secrets`: an operations
value, never a decision input) that the browser keeps in an HTTP-only cookie, mapped here to the
hash of the token it was opened with. The token itself never reaches the browser's cookie jar,
so a stolen cookie is worth one session, not a token, and it authorises the dashboard's pages
only (`infrastructure.api.context.caller`): never the JSON API.

A session ends when it has not been used for ``idle_seconds``, ``max_seconds`` after sign-in
whatever its use, at sign-out, when its token is revoked or expires (the token is looked up
again on every use), and when the service stops (sessions are kept in memory only: a restart
signs everyone out, which is safe). Only the SHA-256 of each session id is kept, so the map
holds nothing a cookie could be made from. Each session has its own CSRF token, which the
dashboard's forms carry and its form posts check (the synchronizer token pattern).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import Lock
from typing import Final

from infrastructure.application.tokens import Principal, TokenHolder, Tokens

SESSION_ID_BYTES: Final = 32


@dataclass(frozen=True, slots=True)
class SignedIn(Principal):
    """A principal as a dashboard session names it, with the session's CSRF token."""

    csrf_token: str = field(repr=False)

    def carries(self, csrf_token: str) -> bool:
        """Whether a form post carries this session's CSRF token (compared in constant time)."""
        return hmac.compare_digest(self.csrf_token.encode(), csrf_token.encode())


@dataclass(slots=True)
class _Session:
    token_sha256: bytes = field(repr=False)
    csrf_token: str = field(repr=False)
    opened: float
    used: float


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", errors="replace")).digest()


class Sessions:
    """The service's open dashboard sessions; safe to use from the request threads."""

    def __init__(
        self,
        tokens: Tokens,
        idle_seconds: float,
        max_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._tokens = tokens
        self._idle = idle_seconds
        self._max = max_seconds
        self.clock = clock
        self._lock = Lock()
        self._open: dict[bytes, _Session] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def open(self, holder: TokenHolder) -> str:
        """A new session for the holder of a token just accepted; its id (for the cookie)."""
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        now = self.clock()
        session = _Session(holder.sha256, secrets.token_urlsafe(SESSION_ID_BYTES), now, now)
        with self._lock:
            # Ended sessions go as new ones come, so the map never outgrows the live ones.
            for key in [k for k, s in self._open.items() if self._ended(s, now)]:
                del self._open[key]
            self._open[_key(session_id)] = session
        return session_id

    def find(self, session_id: str) -> SignedIn | None:
        """Who the session signed in, as their token names them now; None if it has ended (and
        then it is forgotten)."""
        key, now = _key(session_id), self.clock()
        with self._lock:
            session = self._open.get(key)
            if session is None:
                return None
            holder = None if self._ended(session, now) else self._holder(session, now)
            if holder is None:
                del self._open[key]
                return None
            session.used = now
        principal = holder.principal
        return SignedIn(principal.actor, principal.tenant, session.csrf_token)

    def close(self, session_id: str) -> None:
        with self._lock:
            self._open.pop(_key(session_id), None)

    def _ended(self, session: _Session, now: float) -> bool:
        return now - session.used >= self._idle or now - session.opened >= self._max

    def _holder(self, session: _Session, now: float) -> TokenHolder | None:
        """The session's token as the file lists it now; None if it was revoked or expired."""
        holder = self._tokens.holder_of(session.token_sha256)
        return None if holder is None or holder.expired(now) else holder
