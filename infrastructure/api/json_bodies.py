"""Refuse a JSON request body that names one key twice in an object, before any route reads it.

RFC 8259 leaves such an object's meaning to each parser; the framework's keeps the last pair
without a word, so ``{"status": "error", "status": "ok"}`` would be read as ok while another
reader of the same bytes sees an error. Run files, command-line values and snapshot files refuse
it (`domain.json_input`); so does every body here, with the same one line, and nothing is written.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from domain.json_input import repeated_key
from infrastructure.api.errors import invalid
from infrastructure.api.limits import send_error


class OneValueBodies:
    """ASGI middleware: a JSON body whose object repeats a key is answered 422 INVALID_INPUT.

    It sits inside `BodyLimit`, so what it holds in memory is never more than the service allows.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _json_body(scope):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        problem = repeated_key(body) if body else None
        if problem is not None:
            await send_error(send, invalid(f"request body: {problem}"))
            return
        pending = iter(messages)

        async def replayed() -> Message:
            return next(pending, None) or await receive()

        await self.app(scope, replayed, send)


def _json_body(scope: Scope) -> bool:
    declared: bytes = dict(scope["headers"]).get(b"content-type", b"")
    kind = declared.split(b";")[0].strip().lower()
    return kind == b"application/json" or kind.endswith(b"+json")
