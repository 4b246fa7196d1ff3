"""How a schedule is shown in lists, its parts read from the store."""

from __future__ import annotations

from schedules_db import Store
from schedules_db.values import ScheduleInfo
from service.app.responses.schedules import ScheduleOut, schedule_json
from service.app.rows import present


def schedule_view(store: Store, schedule: ScheduleInfo) -> ScheduleOut:
    """A schedule as lists show it, its parts read from the store (no record: ``tvm_version``
    is null, as in ``GET /schedules``)."""
    return schedule_json(
        schedule,
        present(store.catalog.get_workload(schedule.workload_id), "workload"),
        present(store.catalog.get_target(schedule.target_id), "target"),
        present(store.schedules.get_artifact(schedule.artifact_id), "artifact"),
    )
