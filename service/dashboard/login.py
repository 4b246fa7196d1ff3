"""``/dashboard/session``: a browser exchanges an API token for a session cookie, and logs out.

The token travels once, in a JSON body (never a URL), from the login page's script; the answer
sets the cookie (`service.web.sessions`) and says who is logged in with which scopes. Logout ends
the session on the server (the cookie's id stops working at once, wherever it was copied)
and clears the cookie."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from schedules_db.tokens import SCOPES
from service.api.deps import ServicesDep
from service.web.auth import unauthorized
from service.web.refusals import Refusal, refusal_schema
from service.web.sessions import (
    LIFETIME,
    check_csrf,
    clear_session_cookie,
    csrf_refusal,
    same_origin,
    session_of,
    set_session_cookie,
)
from service.web.strict_input import StrictRoute

router = APIRouter(prefix="/dashboard", tags=["dashboard"], route_class=StrictRoute)


class Login(BaseModel):
    """Body of ``POST /dashboard/session``."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=256, description="an API token")


class SessionOut(BaseModel):
    """A session opened: who it acts as, with which scopes, until when."""

    identity: str
    scopes: list[str] = Field(description="the token's scopes with what they imply")
    expires_at: str


class LogoutOut(BaseModel):
    """A logout: whether a session was ended (false: there was none, or it had ended)."""

    ended: bool


@router.post(
    "/session",
    response_model=SessionOut,
    responses={
        400: refusal_schema("auth is off: there is no session to open"),
        401: refusal_schema("the token is unknown, expired or revoked"),
        403: refusal_schema("the request came from another site"),
        429: refusal_schema("the client address's write rate is exhausted",
                            {"Retry-After": "seconds to wait"}),
    },
)  # fmt: skip
def open_session(
    body: Login, request: Request, response: Response, services: ServicesDep
) -> dict[str, Any]:
    """Log in: 200 with the identity and its scopes, and the session cookie; 401 for a token
    that is unknown, expired or revoked; 403 from another origin; 400 with auth off; 429 past
    the client address's write rate (every POST is limited)."""
    services.limits.writes.check(f"addr:{request.client.host if request.client else ''}")
    if not services.settings.auth:
        raise Refusal(400, "auth is off: the dashboard needs no login", "auth_off")
    if not same_origin(request):
        raise csrf_refusal("cross-site login refused")
    token = services.tokens.find(body.token)
    if token is None:
        raise unauthorized("unknown API token", "invalid_token")
    state = token.state()
    if state != "active":
        raise unauthorized(f"API token {token.id} ({token.name}) is {state}", f"token_{state}")
    session, expires = services.sessions.open(token, LIFETIME)
    set_session_cookie(request, response, session, expires)
    return {
        "identity": token.name,
        "scopes": [s for s in SCOPES if s in token.effective],
        "expires_at": expires.isoformat(),
    }


@router.post(
    "/logout",
    response_model=LogoutOut,
    responses={
        403: refusal_schema("the session's CSRF token is missing or wrong"),
        429: refusal_schema("the client address's write rate is exhausted",
                            {"Retry-After": "seconds to wait"}),
    },
)  # fmt: skip
def logout(request: Request, response: Response, services: ServicesDep) -> dict[str, bool]:
    """Log out: end the session (its CSRF token is required) and clear the cookie."""
    services.limits.writes.check(f"addr:{request.client.host if request.client else ''}")
    session = session_of(request)
    ended = False
    if session:
        check_csrf(request, session)
        ended = services.sessions.end(session)
    clear_session_cookie(request, response)
    return {"ended": ended}
