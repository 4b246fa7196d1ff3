"""Strict request input: what Python accepts but JSON, SQL or the store cannot hold is a 422.

`StrictRoute` (``APIRouter(route_class=StrictRoute)``) parses every JSON body with
`strict_loads` and checks query parameters, so that input never reaches the store it would
crash (a 5xx) and the 422 names the field (``loc``):

* ``NaN``, ``Infinity`` and ``-Infinity`` (Python's ``json`` reads them) → ``finite_number``;
* containers nested deeper than `service.app.strict_json.MAX_DEPTH` → ``json_too_deep`` (also
  where ``json`` itself would overflow the stack); objects with more than
  `service.app.strict_json.MAX_KEYS` keys → ``too_many_keys`` (each unexpected key would cost a
  validation error: 55k of them held the event loop 0.5 s);
* text holding NUL (PostgreSQL cannot store it) or an unpaired UTF-16 surrogate (it has no
  UTF-8 form), in a body string, a body key or a query parameter → ``string_unicode``;
* integer literals too long to convert (over 4300 digits) and bodies that are not UTF-8 →
  ``json_invalid``, where FastAPI would answer 400;
* a query parameter the route does not take (``?stat=queued`` for ``state``) →
  ``unknown_parameter``, and one of a single value given twice → ``repeated_parameter``:
  ignored (or the last taken), either would silently answer something else.

The walk over a parsed body is `service.app.strict_json`'s (`service.app.usecases` read JSON
text in a query parameter with it too). Bodies from `THREAD_PARSE_BYTES` on are parsed in a
worker thread, off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, get_origin

from fastapi import HTTPException, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope

from service.app.strict_json import JsonRejected, bad_text, loads
from service.web.auth import access_rules

THREAD_PARSE_BYTES = 256 * 1024


class InputRejected(HTTPException):
    """A 422 in the shape of a validation error: ``{"detail": [{"loc", "msg", "type"}]}``."""

    def __init__(self, loc: tuple[str | int, ...], msg: str, kind: str) -> None:
        super().__init__(status_code=422, detail=[{"loc": list(loc), "msg": msg, "type": kind}])


def strict_loads(body: bytes) -> Any:
    """`service.app.strict_json.loads`, its refusals as `InputRejected` (an HTTPException: FastAPI
    passes it on from body parsing, where any other error would become a 400)."""
    try:
        return loads(body)
    except JsonRejected as err:
        raise InputRejected(err.loc, err.msg, err.kind) from None


def check_query(request: Request, known: frozenset[str]) -> None:
    """`InputRejected` for a query parameter the route does not take (``known``: the names it
    takes; none of them takes a list), given twice, or whose text cannot be stored."""
    seen: set[str] = set()
    for name, value in request.query_params.multi_items():
        if name in seen:
            raise InputRejected(
                ("query", name[:64]), "this parameter takes one value", "repeated_parameter"
            )
        seen.add(name)
        if name not in known:
            raise InputRejected(
                ("query", name[:64]),
                f"this route takes no parameter {name[:64]!r} (it takes "
                f"{', '.join(sorted(known)) or 'none'})",
                "unknown_parameter",
            )
        if reason := bad_text(value):
            raise InputRejected(("query", name[:64]), reason, "string_unicode")


_NOT_PARSED = object()


class StrictJsonRequest(Request):
    """A request whose ``json()`` is `strict_loads`, parsed once (the body is read once)."""

    def __init__(self, scope: Scope, receive: Receive) -> None:
        super().__init__(scope, receive)
        self._strict_json: Any = _NOT_PARSED

    async def json(self) -> Any:
        if self._strict_json is _NOT_PARSED:
            body = await self.body()
            if len(body) >= THREAD_PARSE_BYTES:
                self._strict_json = await run_in_threadpool(strict_loads, body)
            else:
                self._strict_json = strict_loads(body)
        return self._strict_json


BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def query_names(dependant: Dependant) -> frozenset[str]:
    """The query parameters a route takes, its dependencies' (paging, say) included. None may
    take a list (`check_query` refuses a repeated one): an assertion, at start-up."""
    names, pending = set(), [dependant]
    while pending:
        current = pending.pop()
        for param in current.query_params:
            annotation = param.field_info.annotation
            assert get_origin(annotation) not in (list, set, tuple), param.alias
            names.add(param.alias)
        pending.extend(current.dependencies)
    return frozenset(names)


class StrictRoute(APIRoute):
    """An API route with strict input: `check_query`; on a route that takes a body, its access
    rule (`service.web.auth.Access.admit`: 401/403) before the body is read; JSON bodies by
    `strict_loads`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        rules = access_rules(self.dependant)
        known = query_names(self.dependant)

        async def strict_handler(request: Request) -> Response:
            check_query(request, known)
            if request.method in BODY_METHODS:  # who may send it, before a byte of it is read
                for rule in rules:
                    await rule.admit(request)
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict_handler
