"""Security headers on every answer of the app: the dashboard's Content-Security-Policy (no
inline script or style, no origin but the page's own), no framing, no MIME sniffing, no
referrer. A pure ASGI middleware: it adds headers to the response start and never buffers a
body (server-sent events stream through it).

The API's interactive docs (``/docs``: Swagger UI, ``/redoc``: ReDoc) are served from this
origin too (`service.dashboard.install_dashboard`; no CDN) under a policy of their own that
differs in one way: both libraries set inline styles (ReDoc injects its stylesheet), so
``style-src`` allows them there. Scripts are this origin's only, everywhere."""

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
DOCS_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'") + (
    "; worker-src 'self' blob:"  # ReDoc's search runs in a worker built from a blob
)
COMMON: list[tuple[bytes, bytes]] = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
HEADERS = [(b"content-security-policy", CSP.encode()), *COMMON]
DOCS_HEADERS = [(b"content-security-policy", DOCS_CSP.encode()), *COMMON]
DOCS_PAGES = ("/docs", "/redoc")


class SecurityHeaders:
    """Add `HEADERS` to every HTTP response (`DOCS_HEADERS` to the interactive docs')."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = DOCS_HEADERS if scope.get("path") in DOCS_PAGES else HEADERS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)
