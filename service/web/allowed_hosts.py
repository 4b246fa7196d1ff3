"""Only requests addressed to a name the service answers to: a ``Host`` allow-list.

A browser page on ``attacker.example`` can make its own name resolve to 127.0.0.1 (DNS
rebinding) and then talk to a local tunehub as a same-origin page: its ``Origin`` and ``Host``
agree, so an origin check passes, and with auth off (the embedded default) it could import and
submit. What it cannot change is the ``Host`` its browser sends: ``attacker.example``. So every
request whose ``Host`` is not an allowed name gets a 400 before any route sees it.

Allowed: the loopback names (``localhost``, ``127.0.0.1``, ``::1``; only this machine reaches
them), the address `tunehub serve` listens on when it is not a wildcard, and
``TUNEHUB_ALLOWED_HOSTS`` (comma-separated names; ``.example.com`` also allows its subdomains;
``*`` allows any). ``/healthz`` answers any host (a load balancer's probe).

Before any name is compared, the header must be one ``Host`` of the form ``host[:port]`` (RFC
3986: a reg-name, an IPv4 address or a bracketed IPv6 address, then an optional numeric port),
on every path: ``localhost:8000@evil.com`` is not a name with a port, and of two ``Host``
headers a proxy and this service might each read a different one. Either is the same 400.
A pure ASGI middleware: nothing is read or buffered.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")
EXEMPT_PATHS = ("/healthz",)
# RFC 3986 host [":" port]: reg-name (IPv4 is one) or "[" IPv6 "]"; the port's digits.
_REG_NAME = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+"
_HOST_PORT = re.compile(rf"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|{_REG_NAME})(?::[0-9]{{1,5}})?")


def well_formed(header: str) -> bool:
    """True when ``header`` is ``host[:port]`` as RFC 3986 writes it (see `_HOST_PORT`)."""
    match = _HOST_PORT.fullmatch(header)
    if match is None:
        return False
    if (ip6 := match.group("ip6")) is not None:
        try:
            ipaddress.IPv6Address(ip6)
        except ValueError:
            return False
    return True


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
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raws = [v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"]
        if len(raws) > 1:
            shown, detail = ", ".join(raws), "a request must have one Host header"
        elif raws and not well_formed(raws[0]):
            shown, detail = raws[0], f"the Host header {raws[0][:255]!r} is not a host[:port]"
        else:
            name = host_name(raws[0]) if raws else ""
            if scope.get("path") in EXEMPT_PATHS or (name and self.allows(name)):
                await self.app(scope, receive, send)
                return
            shown = name
            detail = (
                f"this service does not answer to the host {name or '(none)'!r}: "
                "add it to TUNEHUB_ALLOWED_HOSTS"
            )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"detail": detail, "type": "invalid_host", "host": shown[:255]}).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
