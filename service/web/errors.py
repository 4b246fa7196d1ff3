"""Errors in FastAPI's shape: ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``.

Also the 422 handler that keeps error bodies small (`validation_error_handler`: at most
`MAX_ERRORS` errors, each echoing at most `MAX_ECHO` characters of the input), the 422 for input
nested too deeply for Python (`recursion_error_handler`), a 405 whose ``Allow`` lists every
method of the path (`http_error_handler`), and the OpenAPI ``responses=`` of the statuses 304,
404 and 413 (`responses`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from fastapi import HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from service.web.limits import BODY_TOO_LARGE

MAX_ERRORS = 20  # a 422 lists at most this many errors, then says how many it left out
MAX_ECHO = 200  # characters of an error's input (as JSON) a 422 echoes
MAX_TEXT = 500  # characters of a message, a context value or a location part


def invalid(
    loc: Sequence[str | int], msg: str, kind: str, value: Any = None
) -> RequestValidationError:
    """A 422 naming the offending field (``loc``) and the rule it broke (``kind``)."""
    return RequestValidationError([{"loc": tuple(loc), "msg": msg, "type": kind, "input": value}])


def prefixed(errors: Iterable[Mapping[str, Any]], prefix: Sequence[str]) -> RequestValidationError:
    """Pydantic errors of a nested model, re-rooted at ``prefix``, as a 422."""
    cleaned = []
    for err in errors:
        item = {k: v for k, v in err.items() if k not in ("ctx", "url")}
        if "ctx" in err:
            item["ctx"] = {
                k: v if isinstance(v, (int, float, str)) else str(v) for k, v in err["ctx"].items()
            }
        item["loc"] = (*prefix, *err["loc"])
        cleaned.append(item)
    return RequestValidationError(cleaned)


def not_found(what: str, key: Any) -> HTTPException:
    """A 404 with a readable reason."""
    return HTTPException(status_code=404, detail=f"{what} {key} not found")


# ---------------------------------------------------------------- 422 bodies of bounded size
async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """A 422 whose body stays small whatever the input: the first `MAX_ERRORS` errors, each
    ``input`` echoed whole only when its JSON fits in `MAX_ECHO` characters (else as a string
    of its first `MAX_ECHO` characters and "…"), then one ``too_many_errors`` entry if any
    were left out (register for ``RequestValidationError``)."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    detail = [_bounded_error(err) for err in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        detail.append(
            {
                "loc": [],
                "msg": f"{len(errors) - MAX_ERRORS} more errors not shown",
                "type": "too_many_errors",
            }
        )
    return JSONResponse(status_code=422, content={"detail": detail})


async def recursion_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """A 422 for a ``RecursionError``: only input nests deeply enough to raise one here (JSON
    bodies are bounded by `service.web.strict_input`; this covers JSON text inside a field)."""
    detail = [{"loc": [], "msg": "input nested too deeply", "type": "too_deep"}]
    return JSONResponse(status_code=422, content={"detail": detail})


def _bounded_error(err: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "loc": [part if isinstance(part, int) else _clip(str(part)) for part in err.get("loc", ())],
        "msg": _clip(str(err.get("msg", ""))),
        "type": _clip(str(err.get("type", ""))),
    }
    if "input" in err:
        item["input"] = preview(err["input"])
    if isinstance(err.get("ctx"), dict):
        item["ctx"] = {_clip(str(k)): preview(v) for k, v in list(err["ctx"].items())[:10]}
    return item


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def preview(value: Any, limit: int = MAX_ECHO) -> Any:
    """``value`` if its JSON fits in ``limit`` characters, else the first ``limit`` characters of
    that JSON and "…". Reads no more of ``value`` than it needs; always JSON-safe."""
    text, size = [], 0
    for token in _json_tokens(value, 0):
        text.append(token)
        size += len(token)
        if size > limit:
            return "".join(text)[:limit] + "…"
    return json.loads("".join(text))


def _json_tokens(value: Any, depth: int) -> Iterator[str]:
    """``value`` as compact JSON, piece by piece (non-JSON values as strings)."""
    if value is None or isinstance(value, bool):
        yield json.dumps(value)
    elif isinstance(value, int):
        yield str(value) if value.bit_length() <= 128 else f'"<{value.bit_length()}-bit integer>"'
    elif isinstance(value, float):
        yield json.dumps(value if math.isfinite(value) else str(value))
    elif isinstance(value, str):
        yield json.dumps(value[: MAX_ECHO + 1])
    elif isinstance(value, bytes):
        yield json.dumps(value[: MAX_ECHO + 1].decode("utf-8", "replace"))
    elif depth >= 16:
        yield '"…"'
    elif isinstance(value, dict):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield ("," if n else "") + json.dumps(str(key)[: MAX_ECHO + 1]) + ":"
            yield from _json_tokens(item, depth + 1)
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        for n, item in enumerate(value):
            if n:
                yield ","
            yield from _json_tokens(item, depth + 1)
        yield "]"
    else:
        yield json.dumps(str(value)[: MAX_ECHO + 1])


# ---------------------------------------------------------------- error statuses in OpenAPI
_REQUEST_ID = "the request's id, as in X-Request-ID (every error body has it)"


class ErrorBody(BaseModel):
    """An error with a readable reason (a 404)."""

    detail: str
    request_id: str = Field("", description=_REQUEST_ID)


class TooLargeBody(BaseModel):
    """A 413: the request body was over the route's cap (see `service.web.limits`)."""

    detail: str
    type: Literal["body_too_large"] = BODY_TOO_LARGE
    limit_bytes: int
    request_id: str = Field("", description=_REQUEST_ID)


_ERROR_RESPONSES: dict[int, dict[str, Any]] = {
    304: {"description": "Not modified: the If-None-Match ETag is still current (no body)"},
    404: {"model": ErrorBody, "description": "Nothing with this id or name"},
    413: {"model": TooLargeBody, "description": "Request body over the route's cap"},
}


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` documenting these statuses (304, 404, 413), each with its body
    schema. FastAPI documents 422 itself; `service.web.auth` documents 401, 403 and 429."""
    return {code: _ERROR_RESPONSES[code] for code in codes}


def _methods_of(request: Request) -> set[str]:
    """Every method a route of the app serves at the request's path."""
    try:  # FastAPI >= 0.16x includes routers lazily: walk the effective routes
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI: app.routes is flat
        routes = [(r.path, r.methods) for r in request.app.routes if hasattr(r, "methods")]
    else:
        routes = [(str(c.path), c.methods) for c in iter_route_contexts(request.app.routes)]
    methods: set[str] = set()
    for path, served in routes:
        pattern, _, _ = compile_path(path)
        if served and pattern.match(request.url.path):
            methods |= set(served)
    return methods


async def http_error_handler(request: Request, exc: Exception) -> Response:
    """FastAPI's own answer to an `HTTPException`, with one correction: a 405's ``Allow``
    lists every method the path serves. Starlette answers with the methods of the first route
    whose path matched, so ``OPTIONS /api/v1/jobs`` said ``Allow: POST`` where GET is served
    too (register for Starlette's ``HTTPException``)."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        methods = _methods_of(request)
        if methods:
            exc.headers = {**(exc.headers or {}), "Allow": ", ".join(sorted(methods))}
    return await http_exception_handler(request, exc)
