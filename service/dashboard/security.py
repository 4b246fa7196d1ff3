"""Security headers on every answer of the app: the dashboard's Content-Security-Policy (no
inline script or style, no origin but the page's own), no framing, no MIME sniffing, no
referrer. A pure ASGI middleware: it adds headers to the response start and never buffers a
body (server-sent events stream through it)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
# FastAPI's interactive docs load Swagger UI / ReDoc with inline script: they keep FastAPI's own
# headers (they are not the dashboard, and show no user input).
UNGUARDED = ("/docs", "/redoc")


class SecurityHeaders:
    """Add `HEADERS` to every HTTP response but the interactive docs'."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope.get("path", "")).startswith(UNGUARDED):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)
