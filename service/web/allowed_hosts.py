"""Only requests addressed to a name the service answers to: a ``Host`` allow-list.

A browser page on ``attacker.example`` can make its own name resolve to 127.0.0.1 (DNS
rebinding) and then talk to a local tunehub as a same-origin page: its ``Origin`` and ``Host``
agree, so an origin check passes, and with auth off (the embedded default) it could import and
submit. What it cannot change is the ``Host`` its browser sends: ``attacker.example``. So every
request whose ``Host`` is not an allowed name gets a 400 before any route sees it.

Allowed: the loopback names (``localhost``, ``127.0.0.1``, ``::1``; only this machine reaches
them), the address `tunehub serve` listens on when it is not a wildcard, and
``TUNEHUB_ALLOWED_HOSTS`` (comma-separated names; ``.example.com`` also allows its subdomains;
``*`` allows any). ``/healthz`` answers any host (a load balancer's probe). A pure ASGI
middleware: nothing is read or buffered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")
EXEMPT_PATHS = ("/healthz",)


def host_name(header: str) -> str:
    """The name of a ``Host`` header: lower case, without port, brackets or a final dot."""
    text = header.strip().lower()
    if text.startswith("["):  # [::1]:8000
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def allowed_hosts(configured: Iterable[str], listen_host: str | None = None) -> tuple[str, ...]:
    """The loopback names, ``listen_host`` (unless a wildcard address) and ``configured``."""
    names = [*LOOPBACK_NAMES, *(host_name(h) if h != "*" else "*" for h in configured)]
    if listen_host is not None and listen_host not in WILDCARD_ADDRESSES:
        names.append(host_name(listen_host))
    return tuple(dict.fromkeys(n for n in names if n))


class AllowedHosts:
    """Answer 400 ``{"detail", "type": "invalid_host", "host"}`` to a request whose ``Host``
    is not one of ``hosts`` (see the module docstring for the forms)."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.suffixes = tuple(h for h in self.hosts if h.startswith("."))

    def allows(self, name: str) -> bool:
        """True when the (normalised) ``name`` is allowed."""
        if "*" in self.hosts or name in self.hosts:
            return True
        return any(name.endswith(s) or name == s[1:] for s in self.suffixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        raw = next((v for k, v in scope.get("headers", []) if k == b"host"), b"")
        name = host_name(raw.decode("latin-1"))
        if name and self.allows(name):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps(
            {
                "detail": f"this service does not answer to the host {name or '(none)'!r}: "
                "add it to TUNEHUB_ALLOWED_HOSTS",
                "type": "invalid_host",
                "host": name[:255],
            }
        ).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
