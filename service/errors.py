"""Errors in FastAPI's shape: ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError


def invalid(
    loc: Sequence[str | int], msg: str, kind: str, value: Any = None
) -> RequestValidationError:
    """A 422 naming the offending field (``loc``) and the rule it broke (``kind``)."""
    return RequestValidationError([{"loc": tuple(loc), "msg": msg, "type": kind, "input": value}])


def prefixed(errors: Iterable[dict[str, Any]], prefix: Sequence[str]) -> RequestValidationError:
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
