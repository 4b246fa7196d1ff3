"""What routes get from the running app, as FastAPI dependencies (``Annotated[T, Depends(...)]``,
the FastAPI full-stack template's ``api/deps.py``): a route names ``store: StoreDep`` and never
reads ``request.app.state`` itself.

The app's lifespan builds one `Services` (`service.web.services`) and puts it on
``app.state.services``; each dependency hands out one part of it. They are ``async def`` so that
FastAPI calls them on the event loop (a plain ``def`` dependency costs a threadpool hop on every
request, which the hot read routes cannot afford: `service.web.reads`). The identity dependencies
(`service.web.auth.AnyReader`, `Submitter`, ...) read the same `Services` through `services`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from schedules_db import Store
from schedules_db.blobs import BlobStore
from service.shared.queue import JobQueue
from service.shared.settings import Settings
from service.web.services import Services, services
from service.web.shared_limits import SharedLimits


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
