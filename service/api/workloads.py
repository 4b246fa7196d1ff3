"""``/api/v1/workloads``: what has been tuned, and its best on every target side by side."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from schedules_db import browse
from service.api.deps import StoreDep
from service.app.admission import target_id_of
from service.app.responses.catalog import WorkloadOut, target_json, workload_json
from service.app.responses.common import iso
from service.app.responses.schedules import CurvePointOut, WorkloadDetail, WorkloadTarget
from service.app.rows import present
from service.app.views.schedules import schedule_view
from service.web.auth import AnyReader
from service.web.errors import not_found, responses
from service.web.schemas import RowId, TargetQuery
from service.web.strict_input import StrictRoute

router = APIRouter(prefix="/workloads", tags=["workloads"], route_class=StrictRoute)


@router.get("", response_model=list[WorkloadOut])
def list_workloads(
    who: AnyReader,
    store: StoreDep,
    operator: str | None = Query(default=None),
    limit: int = Query(default=100, ge=1, le=1000),
) -> list[WorkloadOut]:
    """Workloads (by structural hash), newest first."""
    return [workload_json(w) for w in store.catalog.list_workloads(operator, limit)]


@router.get("/{workload_id}", response_model=WorkloadDetail, responses=responses(404))
def get_workload(workload_id: RowId, who: AnyReader, store: StoreDep) -> WorkloadDetail:
    """One workload and, per target it was measured on, the stored records and the verified best
    (fastest first; targets without a verified best last)."""
    workload = store.catalog.get_workload(workload_id)
    if workload is None:
        raise not_found("workload", workload_id)
    stats = store.records.stats_by_target(workload_id)
    targets: list[WorkloadTarget] = []
    for target_id in set(stats) | {
        s.target_id for s in store.schedules.list_schedules(workload_id=workload_id)
    }:
        best = store.schedules.best(workload_id, target_id)
        records, fastest = stats.get(target_id, (0, None))
        targets.append(
            {
                "target": target_json(present(store.catalog.get_target(target_id), "target")),
                "records": records,
                "fastest_measured_us": fastest,
                "best": schedule_view(store, best) if best else None,
            }
        )
    targets.sort(key=lambda t: (t["best"] is None, t["best"]["latency_us"] if t["best"] else 0))
    return {**workload_json(workload), "targets": targets}


@router.get("/{workload_id}/records", response_model=list[CurvePointOut], responses=responses(404))
async def list_records(
    workload_id: RowId,
    who: AnyReader,
    store: StoreDep,
    target: TargetQuery,
    space: Annotated[str | None, Query(max_length=16, description="one search space")] = None,
    limit: Annotated[int, Query(ge=1, le=20000)] = 20000,
) -> list[CurvePointOut]:
    """The tuning curve of a (workload, target): every measured candidate in measurement
    order, with the job that measured it; a failed one has ``latency_us`` null."""
    if await run_in_threadpool(store.catalog.get_workload, workload_id) is None:
        raise not_found("workload", workload_id)
    target_id = await run_in_threadpool(target_id_of, store, target)
    if target_id is None:
        raise not_found("target", target)
    points = await run_in_threadpool(browse.curve, store, workload_id, target_id, space, limit)
    return [
        {
            "record_id": p.record_id,
            "job_id": p.job_id,
            "latency_us": p.latency_us,
            "failed": p.latency_us is None,
            "created_at": iso(p.created_at),
        }
        for p in points
    ]
