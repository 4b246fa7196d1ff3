"""The FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.sessions import DashboardSessions
from schedules_db.tokens import TokenStore
from service.api import (
    catalog,
    interchange,
    jobs,
    lookup,
    me,
    model_jobs,
    schedules,
    task_uploads,
    workers,
    workloads,
)
from service.app.refusals import Refused
from service.app.responses.fleet import Health
from service.dashboard import install_dashboard
from service.entry.reaper import Reaper
from service.shared.artifact_files import ArtifactFiles, open_blob_store
from service.shared.artifact_readers import ReaderAnnouncer
from service.shared.queue import JobQueue
from service.shared.settings import Settings
from service.web.allowed_hosts import AllowedHosts, allowed_hosts
from service.web.auth import document_responses
from service.web.errors import (
    http_error_handler,
    recursion_error_handler,
    responses,
    validation_error_handler,
)
from service.web.forwarded import ForwardedFor
from service.web.limits import BodyLimit, route_caps
from service.web.metrics import install_metrics
from service.web.openapi_doc import install_openapi
from service.web.refusals import Refusal, refusal_handler
from service.web.refused import refused_handler
from service.web.request_ids import RequestIds, install_log_records
from service.web.services import Services, install_services
from service.web.shared_limits import shared_limits
from service.web.streams import StreamSlots
from service.web.token_cache import VerifiedTokens
from tuning.hardware.host import current_tvm_series
from tuning.jail import set_max_concurrent

log = logging.getLogger("tunehub.api")


def create_app(settings: Settings | None = None, run_reaper: bool = True) -> FastAPI:
    """The tunehub API over the store and broker named by ``settings``.

    Migrations are applied at start. With ``run_reaper`` the process also re-sends lost or
    stale jobs (one reaper per deployment is enough; extra ones are harmless).
    """
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings.store_url)
        upgrade_schema(engine)
        set_max_concurrent(settings.max_parses, settings.parse_wait_s)
        blobs = open_blob_store(settings, engine)
        tokens = TokenStore(engine)
        services = Services(
            settings=settings,
            store=Store(engine, tvm_series=current_tvm_series()),
            queue=JobQueue(settings),
            tokens=tokens,
            limits=shared_limits(settings),
            sessions=DashboardSessions(engine),
            blobs=blobs,
            artifacts=ArtifactFiles(blobs, settings.artifact_cache, settings.artifact_cache_bytes),
            streams=StreamSlots(settings.max_streams_per_identity, settings.max_streams),
            verified_tokens=VerifiedTokens(tokens, settings.token_cache_s),
        )
        install_services(app, services)
        announcer = ReaderAnnouncer(services.store, settings)
        announcer.announce()  # before any request: a worker started next sees it
        announcer.start()
        reaper = Reaper(services.store, services.queue, settings, blobs) if run_reaper else None
        if reaper:
            reaper.start()
        try:
            yield
        finally:
            announcer.stop()
            if reaper:
                reaper.stopped.set()
                reaper.join(timeout=10)  # it gives its lease up: another replica reaps at once
            services.queue.close()
            services.limits.close()
            engine.dispose()

    app = FastAPI(
        title="tunehub",
        version="0.1.0",
        description="Shared auto-tuning for Apache TVM: submit jobs, fetch tuned schedules.",
        lifespan=lifespan,
        docs_url=None,  # served by the dashboard from this origin (service.dashboard)
        redoc_url=None,
    )
    for router in (
        jobs.router,
        schedules.router,
        workloads.router,
        interchange.router,
        catalog.router,
        workers.router,
        me.router,
        lookup.router,
        task_uploads.router,
        model_jobs.router,
    ):
        document_responses(router)
        app.include_router(router, prefix="/api/v1", responses=responses(413))
    app.add_exception_handler(Refusal, refusal_handler)
    app.add_exception_handler(Refused, refused_handler)

    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(RecursionError, recursion_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_middleware(BodyLimit, caps=route_caps(settings), default=settings.max_body_bytes)
    install_dashboard(app)
    install_openapi(app)
    # The one place the client address is resolved: X-Forwarded-For only from trusted_proxies
    # (uvicorn's own proxy handling is off wherever tunehub starts it).
    app.add_middleware(ForwardedFor, trusted=settings.trusted_proxies)
    # A request addressed to a name this service does not answer to goes no further.
    app.add_middleware(AllowedHosts, hosts=allowed_hosts(settings.allowed_hosts))
    install_metrics(app)  # GET /metrics; every request timed, refused hosts included
    # Outermost: every answer carries the request's id, every error body and log line too.
    app.add_middleware(RequestIds)
    install_log_records()

    @app.get("/healthz", tags=["health"], response_model=Health, responses=responses(413))
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    return app
