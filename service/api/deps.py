"""What routes get from the running app, as FastAPI dependencies (``Annotated[T, Depends(...)]``,
the FastAPI full-stack template's ``api/deps.py``): a route names ``store: StoreDep`` and never
reads ``request.app.state`` itself.

The app's lifespan builds one `Services` and puts it on ``app.state.services``
(`install_services`); each dependency hands out one part of it. They are ``async def`` so that
FastAPI calls them on the event loop (a plain ``def`` dependency costs a threadpool hop on every
request, which the hot read routes cannot afford: `service.reads`). The identity dependencies
(`service.auth.AnyReader`, `Submitter`, ...) read the same `Services` through `services`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Request

from schedules_db import Store
from schedules_db.blobs import BlobStore
from schedules_db.sessions import DashboardSessions
from schedules_db.tokens import TokenStore
from service.artifact_files import ArtifactFiles
from service.queue import JobQueue
from service.settings import Settings
from service.shared_limits import SharedLimits


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


def install_services(app: FastAPI, services: Services) -> None:
    """Make ``services`` what this app's dependencies hand out (called by the lifespan)."""
    app.state.services = services


def services(request: Request) -> Services:
    """The `Services` of the app serving ``request``."""
    found = request.app.state.services
    assert isinstance(found, Services), "the app's lifespan has not installed its services"
    return found


async def get_services(request: Request) -> Services:
    """Dependency: every service. The hot read routes take this one instead of two or three
    of the others: each dependency costs FastAPI ~8 us per request."""
    return services(request)


async def get_settings(request: Request) -> Settings:
    """Dependency: the process's settings."""
    return services(request).settings


async def get_store(request: Request) -> Store:
    """Dependency: the store."""
    return services(request).store


async def get_queue(request: Request) -> JobQueue:
    """Dependency: the job queue (the API's side of the broker)."""
    return services(request).queue


async def get_blobs(request: Request) -> BlobStore:
    """Dependency: the artifact store."""
    return services(request).blobs


async def get_limits(request: Request) -> SharedLimits:
    """Dependency: the limits shared by every replica."""
    return services(request).limits


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
QueueDep = Annotated[JobQueue, Depends(get_queue)]
BlobsDep = Annotated[BlobStore, Depends(get_blobs)]
LimitsDep = Annotated[SharedLimits, Depends(get_limits)]
