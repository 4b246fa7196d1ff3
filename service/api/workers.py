"""``/api/v1/workers``: the worker fleet, live and stale."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import SettingsDep, StoreDep
from service.app.responses.fleet import WorkerOut
from service.app.views.fleet import workers_view
from service.web.auth import AnyReader
from service.web.strict_input import StrictRoute

router = APIRouter(prefix="/workers", tags=["workers"], route_class=StrictRoute)


@router.get("", response_model=list[WorkerOut])
def list_workers(who: AnyReader, store: StoreDep, settings: SettingsDep) -> list[WorkerOut]:
    """Every registered worker: ``live`` (heart-beating), ``stale`` (silent for longer than
    the stale limit: killed or cut off) or ``stopped`` (shut down cleanly)."""
    return workers_view(store, settings)
