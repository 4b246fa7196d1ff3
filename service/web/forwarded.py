"""Who the client is behind a reverse proxy: ``X-Forwarded-For``, believed only from a proxy.

Limits and the auth-off identity (``local@<address>``) count per client address
(`service.web.auth`, `service.dashboard.login`), read from ``scope["client"]``. Anyone can send
``X-Forwarded-For``, so believing it from any peer lets a client pick a fresh address per
request and escape every per-address limit. uvicorn's own proxy handling (on by default, for
peers in ``forwarded_allow_ips``: 127.0.0.1, which is also where a local attacker connects from)
is switched off wherever tunehub starts uvicorn, and this middleware is the one place the client
address is resolved.

Only when the TCP peer is in ``Settings.trusted_proxies`` (IPs or CIDR networks; default none):
the client is the rightmost ``X-Forwarded-For`` address that is not itself a trusted proxy (each
proxy appends the address it saw, so entries left of that one are the client's own word), and
``X-Forwarded-Proto`` (``http`` or ``https``) sets the scheme. A header whose deciding entry is
not an IP address leaves the peer as the client. From any other peer both headers are ignored.
A pure ASGI middleware: nothing is read or buffered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
SCHEMES = {"http": ("http", "ws"), "https": ("https", "wss")}  # proto -> (http, websocket)


def networks(trusted: Iterable[str]) -> tuple[Network, ...]:
    """The networks of ``trusted`` (IPs or CIDRs); a ValueError names a bad one."""
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in trusted)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def is_trusted(address: str, trusted: Sequence[Network]) -> bool:
    """True when ``address`` (an IP's text) is in one of ``trusted``."""
    ip = _address(address)
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return any(ip in net for net in trusted)


def forwarded_client(values: Sequence[str], trusted: Sequence[Network]) -> str | None:
    """The client address ``X-Forwarded-For`` (all its header lines, in order) names, given
    that the peer is trusted: the rightmost entry not in ``trusted`` (the leftmost when all
    are); None when there is no entry or that entry is not an IP address."""
    entries = [e.strip() for value in values for e in value.split(",") if e.strip()]
    if not entries:
        return None
    chosen = next((e for e in reversed(entries) if not is_trusted(e, trusted)), entries[0])
    ip = _address(chosen)
    return str(ip) if ip is not None else None


class ForwardedFor:
    """Rewrite ``scope["client"]`` (and the scheme) from ``X-Forwarded-For`` (and
    ``X-Forwarded-Proto``) when the peer is one of ``trusted``; see the module docstring."""

    def __init__(self, app: ASGIApp, trusted: Iterable[str]) -> None:
        self.app = app
        self.trusted = networks(trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.trusted:
            peer = scope.get("client")
            if peer and is_trusted(peer[0], self.trusted):
                scope = self._resolved(scope)
        await self.app(scope, receive, send)

    def _resolved(self, scope: Scope) -> Scope:
        forwarded, protos = [], []
        for key, value in scope.get("headers", []):
            if key == b"x-forwarded-for":
                forwarded.append(value.decode("latin-1"))
            elif key == b"x-forwarded-proto":
                protos.append(value.decode("latin-1"))
        scope = dict(scope)
        client = forwarded_client(forwarded, self.trusted)
        if client is not None:
            scope["client"] = (client, 0)
        if protos:  # the nearest proxy's word: the last value
            proto = protos[-1].split(",")[-1].strip().lower()
            if proto in SCHEMES:
                scope["scheme"] = SCHEMES[proto][scope["type"] == "websocket"]
        return scope
