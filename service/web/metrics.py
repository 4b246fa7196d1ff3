"""``GET /metrics`` in Prometheus' text format: the request histogram of the API processes and
the families computed at scrape time (`service.web.fleet_metrics`).

``tunehub_http_request_duration_seconds{method,route,status}``: how long each answer took,
from the request's arrival to its last byte (a job event stream's, to its end). ``route`` is
the template of the route that served it (``/api/v1/jobs/{job_id}``), ``unmatched`` when none
did, so its values are bounded by the app's routes, whatever paths clients send; ``method``
is one of `METHODS` or ``other``.

Across processes: with ``PROMETHEUS_MULTIPROC_DIR`` set before the process starts (an empty
folder every process of the API on this host can write; `tunehub serve --api-workers N`
makes one when it is unset), each process writes its counts there and any of them answers
the sum (prometheus_client's multiprocess mode). Without it the counts are this process's.

Who may read it: with auth on, a token with the ``read`` scope (never an anonymous reader:
it shows every target, worker and route of the service); with auth off, anyone who reaches
the port. The Host check applies as on every route but ``/healthz``.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, values
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.routing import Mount, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.web.auth import Reader
from service.web.fleet_metrics import FleetCollector, FleetReads
from service.web.services import services

log = logging.getLogger("tunehub.api")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
REQUEST_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                     10.0, 30.0, 60.0)  # fmt: skip


def multiprocess() -> bool:
    """Whether prometheus_client writes this process's values to ``PROMETHEUS_MULTIPROC_DIR``
    (decided when it was first imported)."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


def request_histogram() -> Histogram:
    """A new request histogram, in no registry (`HttpMetrics.exposition` makes one per
    scrape)."""
    return Histogram(
        "tunehub_http_request_duration_seconds",
        "Seconds from a request's arrival to its answer's last byte",
        ["method", "route", "status"],
        buckets=REQUEST_BUCKETS_S,
        registry=None,
    )


_process_histogram: Histogram | None = None


class HttpMetrics:
    """The request histogram of one app, and the exposition of everything ``/metrics`` shows.
    In multiprocess mode every app of the process shares one histogram (two would overwrite
    each other's counts in the process's file); otherwise each app counts its own."""

    def __init__(self) -> None:
        global _process_histogram
        self.shared = multiprocess()
        if self.shared:
            _process_histogram = _process_histogram or request_histogram()
            self.requests = _process_histogram
        else:
            self.requests = request_histogram()
        self.fleet = FleetReads()  # the probes and store readings of this app's scrapes

    def exposition(self, request: Request) -> Response:
        """Every family, encoded as the scraper's ``Accept`` asks."""
        registry = CollectorRegistry()  # collectors are not collected to be described
        if self.shared:
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        else:
            registry.register(self.requests)
        registry.register(FleetCollector(services(request), self.fleet))
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)


class RouteTemplates:
    """The template of the app's route that serves a path (first match, as the router)."""

    def __init__(self, app: Any) -> None:
        self.exact: dict[str, str] = {}
        self.patterns: list[tuple[re.Pattern[str], str]] = []
        for path, route in _routes(app):
            if isinstance(route, Mount):
                regex, _, _ = compile_path(route.path + "/{path:path}")
                self.patterns.append((regex, route.path + "/{path}"))
            elif "{" not in path:
                self.exact.setdefault(path, path)
            else:
                self.patterns.append((compile_path(path)[0], path))

    def of(self, path: str) -> str:
        """``path``'s template, else `UNMATCHED`."""
        if path in self.exact:
            return self.exact[path]
        for regex, template in self.patterns:
            if regex.match(path):
                return template
        return UNMATCHED


def _routes(app: Any) -> Iterable[tuple[str, Any]]:
    try:  # FastAPI >= 0.16x includes routers lazily: walk the effective routes
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - older FastAPI: app.routes is flat
        return [(getattr(r, "path", ""), r) for r in app.routes]
    return [(str(c.path), getattr(c, "original_route", c)) for c in iter_route_contexts(app.routes)]


class RequestMetrics:
    """ASGI middleware observing each HTTP request in `HttpMetrics.requests`."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self.templates: RouteTemplates | None = None  # the app's routes, read at first use

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = "none"  # the client left before an answer began

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = str(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        except Exception:
            status = "500" if status == "none" else status
            raise
        finally:
            if self.templates is None:
                self.templates = RouteTemplates(scope["app"])
            method = scope["method"] if scope["method"] in METHODS else "other"
            route = self.templates.of(scope["path"])
            elapsed = time.perf_counter() - started
            self.metrics.requests.labels(method, route, status).observe(elapsed)


def install_metrics(app: FastAPI) -> None:
    """Serve ``GET /metrics`` (left out of the OpenAPI document: it is not JSON) and time every
    request. Call after the other middleware that should be timed is added."""
    # No ``_created`` series: multiprocess mode has none either.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    metrics = HttpMetrics()
    if not metrics.shared and _multiproc_env_set():
        log.warning(
            "PROMETHEUS_MULTIPROC_DIR was set after prometheus_client was imported: this "
            "process's request counts are its own"
        )
    app.add_middleware(RequestMetrics, metrics=metrics)

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics(request: Request, _: Reader) -> Response:
        """The metrics of the module docstring."""
        return metrics.exposition(request)


def _multiproc_env_set() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
