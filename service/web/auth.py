"""Who is asking, and may they: bearer tokens → `Identity`, one `Access` rule per route.

Every route under ``/api/v1`` takes exactly one of the `Annotated` identities below
(`AnyReader`, `Reader`, `Submitter`, `CodeSubmitter`, `Admin`); the rule is the `Access` object
in its dependency, so the route table says what each route needs (`access_rules`). A rule:

* with auth off (`Settings.auth` False, the embedded default): every client is the identity
  ``local`` with every scope (``local@<address>`` for a client not on loopback, so that limits
  count per client address);
* with auth on: ``Authorization: Bearer <token>`` must name an active token (else 401 with
  ``WWW-Authenticate: Bearer``; missing, unknown, expired and revoked tokens each say so), whose
  scopes imply the rule's (else 403). `AnyReader` routes also answer without a token when
  ``Settings.anonymous_reads`` is on (identity ``anonymous``);
* on POST routes (writes, and the batch read ``POST /lookup``), spends one token of the
  identity's write bucket (else 429).

Checks that depend on the request body are the application layer's (`service.app.actors.require`:
raw TIR needs ``submit-code``, priority above 0 needs ``admin``;
`service.app.admission.check_target`: a target no worker registered needs ``admin``), answered
through `service.web.refused`. 401/403/429 bodies are `service.web.refusals.Refusal`'s
``{"detail", "type", ...}``; the unknown-target 422 is FastAPI's
``{"detail": [{"loc", "msg", "type"}]}``.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from schedules_db.tokens import ADMIN, READ, SCOPES, SUBMIT, SUBMIT_CODE, TokenInfo, TokenStore
from service.app.actors import Identity
from service.web.reads import inline_ok
from service.web.refusals import Refusal, refusal_schema
from service.web.services import services
from service.web.sessions import SAFE_METHODS, check_csrf, csrf_refusal, same_origin, session_of

log = logging.getLogger("tunehub.api")
LOCAL, ANONYMOUS = "local", "anonymous"
_bearer = HTTPBearer(auto_error=False, description="an API token: `tunehub token create`")


def unauthorized(msg: str, kind: str) -> Refusal:
    """A 401 for a missing or unusable token (RFC 6750's challenge in ``WWW-Authenticate``)."""
    challenge = 'Bearer realm="tunehub"'
    if kind != "missing_token":
        challenge += ', error="invalid_token"'
    return Refusal(401, msg, kind, {"WWW-Authenticate": challenge})


def forbidden(
    scope: str, loc: Sequence[str], msg: str, kind: str = "insufficient_scope"
) -> Refusal:
    """A 403: the identity lacks ``scope`` (or, with another ``kind``, another right) for what
    ``loc`` names."""
    challenge = f'Bearer realm="tunehub", error="insufficient_scope", scope="{scope}"'
    return Refusal(403, msg, kind, {"WWW-Authenticate": challenge}, scope=scope, loc=list(loc))


class Access:
    """A route's access rule, and the FastAPI dependency that enforces it (see the module
    docstring): the scope it needs, whether anonymous reads may pass, whether it is a write."""

    def __init__(self, scope: str, anonymous: bool = False, write: bool = False) -> None:
        assert scope in SCOPES
        self.scope, self.anonymous, self.write = scope, anonymous, write

    def __repr__(self) -> str:
        extra = ", anonymous" if self.anonymous else ""
        return f"Access({self.scope!r}{extra}{', write' if self.write else ''})"

    async def __call__(
        self,
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Identity:
        identity = await self._admitted(request, credentials)
        if self.write:
            writes = services(request).limits.writes
            if writes.remote:  # Redis: a sick one must hold a worker thread, not the loop
                await run_in_threadpool(writes.check, identity.limit_key)
            else:
                writes.check(identity.limit_key)
        return identity

    async def admit(self, request: Request) -> None:
        """Identify and check the scope, spending no write budget: `StrictRoute` calls this
        before a body is read, so an anonymous or unauthorised client cannot make the server
        read and parse megabytes only to be told 401 or 403."""
        await self._admitted(request, await _bearer(request))

    async def _admitted(
        self, request: Request, credentials: HTTPAuthorizationCredentials | None
    ) -> Identity:
        state = services(request)
        cached = None  # the token's row as read less than token_cache_s ago
        if state.settings.auth and credentials is not None:
            cached = state.verified_tokens.cached(credentials.credentials)
        lookup = state.settings.auth and (
            bool(session_of(request)) or (credentials is not None and cached is None)
        )
        if lookup and not inline_ok(state.tokens.engine):  # across a network, or pool busy
            identity = await run_in_threadpool(self._identify, request, credentials, cached)
        else:  # no I/O (a cached token), or one indexed SELECT on a local store: not worth a hop
            identity = self._identify(request, credentials, cached)
        if identity.token is not None and state.tokens.due_for_mark(identity.token.id):
            await run_in_threadpool(_mark_used, state.tokens, identity.token.id)
        if not identity.can(self.scope):
            raise forbidden(
                self.scope,
                ("header", "authorization"),
                f"this route needs the {self.scope!r} scope; {identity.name} has "
                f"{', '.join(s for s in SCOPES if s in identity.scopes) or 'none'}",
            )
        return identity

    def _identify(
        self,
        request: Request,
        credentials: HTTPAuthorizationCredentials | None,
        cached: TokenInfo | None = None,
    ) -> Identity:
        shared = services(request)
        settings = shared.settings
        address = request.client.host if request.client else ""
        if not settings.auth:
            # No credentials to forge, but a browser on this origin could be made to post by
            # another site's page: writes a browser marks as cross-site are refused.
            if request.method not in SAFE_METHODS and not same_origin(request):
                raise csrf_refusal("cross-site request refused")
            return _local(address)
        if credentials is None and (session := session_of(request)):
            token = shared.sessions.find(session)
            usable = token is not None and token.state() == "active"
            if usable or not (self.anonymous and settings.anonymous_reads):
                if token is None:
                    raise unauthorized(
                        "the dashboard session has ended: log in again", "session_ended"
                    )
                check_csrf(request, session)
                return _token_identity(token)
        if credentials is None:
            if self.anonymous and settings.anonymous_reads:
                return _anonymous(address)
            raise unauthorized(
                "an API token is required: Authorization: Bearer <token>", "missing_token"
            )
        token = cached or shared.verified_tokens.find(credentials.credentials)
        if token is None:
            raise unauthorized("unknown API token", "invalid_token")
        return _token_identity(token)


def _token_identity(token: TokenInfo) -> Identity:
    """The identity of an active token; 401 naming its state otherwise."""
    state = token.state()
    if state != "active":
        raise unauthorized(f"API token {token.id} ({token.name}) is {state}", f"token_{state}")
    return Identity(token.name, token.effective, f"id:{token.name}", token)


def viewer(request: Request) -> Identity | None:
    """Who a dashboard page is shown to: ``local`` with auth off; with auth on, the identity of
    the browser's session, else ``anonymous`` where anonymous reads are on, else None (the page
    asks to log in). A session whose token is no longer active counts as none."""
    shared = services(request)
    address = request.client.host if request.client else ""
    if not shared.settings.auth:
        return _local(address)
    session = session_of(request)
    token = shared.sessions.find(session) if session else None
    if token is not None and token.state() == "active":
        return Identity(token.name, token.effective, f"id:{token.name}", token)
    return _anonymous(address) if shared.settings.anonymous_reads else None


def _local(address: str) -> Identity:
    """Auth off: every scope, as ``local`` (``local@<address>`` off loopback)."""
    name = LOCAL if _is_loopback(address) else f"{LOCAL}@{address}"
    return Identity(name, frozenset(SCOPES), f"addr:{address}")


def _anonymous(address: str) -> Identity:
    """An anonymous reader (auth on, anonymous reads allowed)."""
    return Identity(ANONYMOUS, frozenset({READ}), f"addr:{address}")


def _mark_used(tokens: TokenStore, token_id: int) -> None:
    """Write a token's ``last_used_at`` (off the event loop); a busy store only loses the
    mark: it must not fail the request it was made for."""
    try:
        tokens.mark_used(token_id)
    except OperationalError as err:
        log.warning("could not record the use of token %s: %s", token_id, err)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # no address (an in-process client) or a name
        return True


ANY_READ = Access(READ, anonymous=True)
ANY_READ_POSTED = Access(READ, anonymous=True, write=True)  # a read sent as a POST: limited
READ_ONLY = Access(READ)
SUBMIT_RULE = Access(SUBMIT, write=True)
SUBMIT_CODE_RULE = Access(SUBMIT_CODE, write=True)
ADMIN_RULE = Access(ADMIN, write=True)

AnyReader = Annotated[Identity, Depends(ANY_READ)]  # read; anonymous if the operator allows
# The same, for a read sent as a POST (a whole model's lookup): it spends the write bucket.
PostedReader = Annotated[Identity, Depends(ANY_READ_POSTED)]
Reader = Annotated[Identity, Depends(READ_ONLY)]  # read, always with a token
Submitter = Annotated[Identity, Depends(SUBMIT_RULE)]
CodeSubmitter = Annotated[Identity, Depends(SUBMIT_CODE_RULE)]
Admin = Annotated[Identity, Depends(ADMIN_RULE)]


def access_rules(dependant: Dependant) -> list[Access]:
    """The `Access` rules among a route's dependencies (a well-formed route has one)."""
    found, stack = [], list(dependant.dependencies)
    while stack:
        sub = stack.pop()
        if isinstance(sub.call, Access):
            found.append(sub.call)
        stack.extend(sub.dependencies)
    return found


def route_table(app: FastAPI) -> list[tuple[str, str, list[Access]]]:
    """(method, full path, access rules) of every API route the app serves."""
    try:  # FastAPI >= 0.16x includes routers lazily: walk the effective routes
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI: app.routes is flat
        return [
            (method, route.path, access_rules(route.dependant))
            for route in app.routes
            if isinstance(route, APIRoute)
            for method in sorted(route.methods or ())
        ]
    table = []
    for context in iter_route_contexts(app.routes):
        if isinstance(context.original_route, APIRoute):
            for method in sorted(context.methods or ()):
                table.append((method, str(context.path), access_rules(context.dependant)))
    return table


def document_responses(router: APIRouter) -> None:
    """Add the statuses a router's access rules answer (401, 403, and 429 and 503 on writes) to each
    of its routes' OpenAPI responses. Call before the router is included."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            continue
        rules = access_rules(route.dependant)
        if not rules:
            continue
        route.responses.setdefault(
            401,
            refusal_schema(
                "no usable API token (missing, unknown, expired or revoked)",
                {"WWW-Authenticate": "Bearer"},
            ),
        )
        route.responses.setdefault(403, refusal_schema("the token lacks a scope this needs"))
        if any(rule.write for rule in rules):
            route.responses.setdefault(
                429,
                refusal_schema(
                    "the identity's write rate or job cap is exhausted",
                    {"Retry-After": "seconds to wait"},
                ),
            )
            route.responses.setdefault(
                503,
                refusal_schema(
                    "the limits shared by the API's replicas (Redis) are unreachable: nothing "
                    "was done (type limits_unavailable); or another part of the service is",
                    {"Retry-After": "seconds to wait"},
                ),
            )
