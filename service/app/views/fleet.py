"""How the worker fleet is shown (``GET /workers``, the dashboard's workers page)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schedules_db import Store
from service.app.responses.catalog import TargetRef
from service.app.responses.fleet import WorkerOut, worker_json
from service.shared.settings import Settings


def workers_view(store: Store, settings: Settings) -> list[WorkerOut]:
    """Every registered worker as ``GET /workers`` shows it (see
    `service.app.responses.fleet.worker_json`)."""
    now = datetime.now(timezone.utc)
    stale_after = timedelta(seconds=settings.stale_after_s)
    targets: dict[int, TargetRef] = {
        t.id: {"id": t.id, "label": t.label, "key": t.key} for t in store.catalog.list_targets()
    }
    return [worker_json(worker, targets, now, stale_after) for worker in store.fleet.list_workers()]
