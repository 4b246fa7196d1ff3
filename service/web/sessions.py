"""The dashboard's session cookie and its CSRF token.

A browser logs in by sending an API token once (``POST /dashboard/session``); it gets back a
session cookie, ``HttpOnly`` (no script reads it) and ``SameSite=Strict`` (no other site's page
sends it), ``Secure`` with the ``__Host-`` prefix when served over HTTPS. ``EventSource`` cannot
send an ``Authorization`` header; a cookie it sends. The token itself never reaches a URL,
``localStorage`` or the cookie: the cookie holds a random session id, stored hashed
(`schedules_db.sessions`).

A request authenticated by the cookie that changes something (any method but GET, HEAD,
OPTIONS) must also carry ``X-CSRF-Token``: an HMAC of the session id that the server puts in
each page's ``<meta name="csrf-token">``. Another origin can neither read that page nor compute
the HMAC; a request whose ``Origin`` or ``Sec-Fetch-Site`` says it came from another site is
refused as well (`check_csrf`).
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta

from fastapi import Request, Response

from service.web.refusals import Refusal

COOKIE = "tunehub_session"
SECURE_COOKIE = "__Host-tunehub_session"
CSRF_HEADER = "X-CSRF-Token"
LIFETIME = timedelta(hours=12)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def session_of(request: Request) -> str | None:
    """The session id the request's cookie carries, if any (over HTTPS only the ``__Host-``
    cookie: a plain one could have been planted over HTTP)."""
    if _secure(request):
        return request.cookies.get(SECURE_COOKIE)
    return request.cookies.get(COOKIE)


def csrf_token(session: str) -> str:
    """The CSRF token of a session: HMAC-SHA256 keyed by the (secret) session id."""
    return hmac.new(session.encode(), b"tunehub-csrf", hashlib.sha256).hexdigest()


def same_origin(request: Request) -> bool:
    """False when the browser says the request came from another site (``Sec-Fetch-Site``) or
    another origin (``Origin``); True when it says nothing (not a browser) or same-origin."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is not None:
        own = f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
        return origin == own
    return True


def csrf_refusal(msg: str) -> Refusal:
    """A 403 ``csrf_failed``."""
    return Refusal(403, msg, "csrf_failed", {}, loc=["header", CSRF_HEADER.lower()])


def check_csrf(request: Request, session: str) -> None:
    """403 unless a cookie-authenticated request that changes something comes from this
    origin with the session's CSRF token."""
    if request.method in SAFE_METHODS:
        return
    if not same_origin(request):
        raise csrf_refusal("cross-site request refused")
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), csrf_token(session).encode()):
        raise csrf_refusal(f"a dashboard session's writes need its {CSRF_HEADER} header")


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(
    request: Request, response: Response, session: str, expires: datetime
) -> None:
    """Give the browser its session cookie (see the module docstring)."""
    response.set_cookie(
        SECURE_COOKIE if _secure(request) else COOKIE,
        session,
        expires=expires,
        path="/",
        secure=_secure(request),
        httponly=True,
        samesite="strict",
    )


def clear_session_cookie(request: Request, response: Response) -> None:
    """Tell the browser to drop its session cookie."""
    response.delete_cookie(
        SECURE_COOKIE if _secure(request) else COOKIE,
        path="/",
        secure=_secure(request),
        httponly=True,
        samesite="strict",
    )
