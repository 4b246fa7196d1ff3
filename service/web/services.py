"""The long-lived objects of one API process (`Services`), built by the app's lifespan and read
by every request: the API's dependencies (`service.api.deps`), the identity checks
(`service.web.auth`) and the dashboard all take them from here."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI, Request

from schedules_db import Store
from schedules_db.blobs import BlobStore
from schedules_db.sessions import DashboardSessions
from schedules_db.tokens import TokenStore
from service.shared.artifact_files import ArtifactFiles
from service.shared.queue import JobQueue
from service.shared.settings import Settings
from service.web.shared_limits import SharedLimits
from service.web.streams import StreamSlots
from service.web.token_cache import VerifiedTokens


@dataclass(frozen=True)
class Services:
    """The long-lived objects of one API process, shared by every request (each is thread-safe:
    the store's contract, the token store, Celery's producer pool, the limits' locks)."""

    settings: Settings
    store: Store
    queue: JobQueue
    tokens: TokenStore
    limits: SharedLimits  # write rates, one parse per identity, admission (maybe in Redis)
    sessions: DashboardSessions
    blobs: BlobStore  # where artifact bytes live (schedules_db.blobs)
    artifacts: ArtifactFiles  # verified local files of them, for downloads
    streams: StreamSlots  # the job event streams this process holds open
    verified_tokens: VerifiedTokens  # bearer tokens as the store said, for token_cache_s


def install_services(app: FastAPI, services: Services) -> None:
    """Make ``services`` what this app's dependencies hand out (called by the lifespan)."""
    app.state.services = services


def services(request: Request) -> Services:
    """The `Services` of the app serving ``request``."""
    found = request.app.state.services
    assert isinstance(found, Services), "the app's lifespan has not installed its services"
    return found
