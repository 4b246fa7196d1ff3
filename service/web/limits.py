"""Request body caps, enforced before any route reads a byte (a pure ASGI middleware).

Contract: a request whose ``Content-Length`` is over its route's cap gets a 413 at once, its body
unread; a body without one (chunked) is counted as it arrives and answered with a 413 as soon as
it passes the cap, without reading further. Either way the connection is closed after the 413,
so the rest of the body is never read, and the 413's body says the cap::

    {"detail": "...", "type": "body_too_large", "limit_bytes": 1048576}

The cap of a request is its (method, path) entry in ``caps``, else ``default``; `route_caps`
gives the service's from its settings (``TUNEHUB_MAX_*_BODY_BYTES``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.shared.settings import Settings

BODY_TOO_LARGE: Final = "body_too_large"


def too_large_body(method: str, path: str, limit: int) -> dict[str, object]:
    """The 413's JSON body."""
    return {
        "detail": f"request body over the {limit}-byte limit of {method} {path}",
        "type": BODY_TOO_LARGE,
        "limit_bytes": limit,
    }


class BodyLimit:
    """ASGI middleware refusing request bodies over a per-route byte cap with a 413."""

    def __init__(self, app: ASGIApp, caps: Mapping[tuple[str, str], int], default: int) -> None:
        """``caps``: bytes allowed per (method, path), e.g. ``("POST", "/api/v1/jobs")``;
        ``default``: bytes allowed on every other request."""
        self.app = app
        self.caps = {(m.upper(), path.rstrip("/")): cap for (m, path), cap in caps.items()}
        self.default = default

    def cap_for(self, method: str, path: str) -> int:
        """The body cap of a request (a trailing slash does not matter)."""
        return self.caps.get((method.upper(), path.rstrip("/")), self.default)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        cap = self.cap_for(method, path)
        declared = _content_length(scope)
        if declared is not None and declared > cap:
            await _send_413(send, method, path, cap)
            return

        received = 0
        refused = False  # our 413 went out: the app's own answer is dropped
        app_started = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    if not app_started:
                        await _send_413(send, method, path, cap)
                        refused = True
                    # To the app the client is gone: it stops reading and answers nobody.
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal app_started
            if refused:
                return
            if message["type"] == "http.response.start":
                app_started = True
            await send(message)

        await self.app(scope, counting_receive, guarded_send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_413(send: Send, method: str, path: str, cap: int) -> None:
    body = json.dumps(too_large_body(method, path, cap)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def route_caps(settings: Settings) -> dict[tuple[str, str], int]:
    """The body caps of the routes that take more than ``settings.max_body_bytes``."""
    return {
        ("POST", "/api/v1/jobs"): settings.max_job_body_bytes,
        ("POST", "/api/v1/import"): settings.max_import_body_bytes,
        ("POST", "/api/v1/models"): settings.max_model_body_bytes,
        # A build's missing tasks: up to 64 module JSON texts (a ResNet's: 35-82 KB each).
        ("POST", "/api/v1/tasks"): settings.max_import_body_bytes,
    }
