"""The API's interactive docs, from this origin: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc)
over ``/openapi.json``, their scripts and styles in ``/static/vendor`` (vendored from npm by
`make install`; FastAPI's own pages load them from a CDN) and Swagger UI's start-up in
``/static/docs.js`` (no inline script: see `service.dashboard.security` for their policy)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response

TEMPLATES = Path(__file__).parent / "templates"
PAGES = {name: (TEMPLATES / f"{name}.html").read_bytes() for name in ("docs", "redoc")}

router = APIRouter(include_in_schema=False)


@router.get("/docs")
def swagger_ui() -> Response:
    """Swagger UI: try the API from the browser."""
    return Response(PAGES["docs"], media_type="text/html; charset=utf-8")


@router.get("/redoc")
def redoc() -> Response:
    """ReDoc: the API's reference."""
    return Response(PAGES["redoc"], media_type="text/html; charset=utf-8")
