"""The dashboard: pages at ``/`` over the same store as the API, their scripts and styles at
``/static``, the login at ``/dashboard/session``, the API's interactive docs at ``/docs`` and
``/redoc`` (Swagger UI and ReDoc from ``/static/vendor``, never a CDN), security headers on
every answer."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from service.dashboard import api_docs, login, pages
from service.dashboard.highlight import stylesheet
from service.dashboard.security import SecurityHeaders

STATIC = Path(__file__).parent / "static"


def install_dashboard(app: FastAPI) -> None:
    """Serve the dashboard from ``app``."""
    app.include_router(login.router)
    app.include_router(pages.router)
    app.include_router(api_docs.router)
    css = stylesheet().encode()

    @app.get("/static/highlight.css", include_in_schema=False)
    def highlight_css() -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(SecurityHeaders)
