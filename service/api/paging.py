"""Pagination of list routes: ``offset`` / ``limit`` / ``order`` query parameters, and the
headers that carry the total (``X-Total-Count``) and the next page (RFC 8288 ``Link``), so that
a list's body stays the plain JSON array it always was."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request, Response

from schedules_db.browse import Page

MAX_LIMIT = 1000
PAGE_HEADERS: dict[str, dict[str, Any]] = {
    "X-Total-Count": {
        "description": "how many rows match the filters",
        "schema": {"type": "integer"},
    },
    "Link": {
        "description": 'the next page, as <url>; rel="next" (absent on the last)',
        "schema": {"type": "string"},
    },
}


@dataclass(frozen=True)
class PageParams:
    """Which page a list route answers: rows ``offset`` to ``offset + limit``, in ``order``."""

    offset: int
    limit: int
    descending: bool


async def page_params(
    offset: Annotated[int, Query(ge=0, le=10**9, description="rows to skip")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="rows per page")] = 100,
    order: Annotated[Literal["asc", "desc"], Query(description="sort direction")] = "desc",
) -> PageParams:
    """Dependency: the page a list route answers."""
    return PageParams(offset, limit, order == "desc")


Paging = Annotated[PageParams, Depends(page_params)]


def page_headers(request: Request, response: Response, page: Page[Any]) -> None:
    """Set ``X-Total-Count`` and, unless ``page`` is the last, a ``Link`` to the next one."""
    response.headers["X-Total-Count"] = str(page.total)
    following = page.offset + page.limit
    if following < page.total:
        url = request.url.include_query_params(offset=following)
        response.headers["Link"] = f'<{url.path}?{url.query}>; rel="next"'
