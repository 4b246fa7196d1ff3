"""``/api/v1/schedules``: verified best schedules and their compiled artifacts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, Response

from schedules_db.store import target_key
from service.auth import AnyReader
from service.errors import invalid, not_found, responses
from service.schemas import RowId, schedule_json
from service.strict_input import StrictRoute
from tuning.targets import TargetError, resolve_target

router = APIRouter(prefix="/schedules", tags=["schedules"], route_class=StrictRoute)


def target_id_of(request: Request, target: str) -> int | None:
    """The target id named by key, label, "host" or JSON; None if it is unknown here."""
    store = request.app.state.store
    row = store.find_target(target)
    if row is None:
        try:
            resolved = resolve_target(target)
        except TargetError as err:
            raise invalid(("query", "target"), str(err), "invalid_target", target) from None
        row = store.find_target(target_key(resolved.canonical))
    return None if row is None else row.id


def render(request: Request, row: Any, detail: bool) -> dict[str, Any]:
    """A schedule row with its workload, target, artifact and record, as JSON."""
    store = request.app.state.store
    return schedule_json(
        row,
        store.get_workload(row.workload_id),
        store.get_target(row.target_id),
        store.get_artifact(row.artifact_id),
        store.get_record(row.record_id) if detail and row.record_id is not None else None,
        detail,
    )


@router.get("")
def list_schedules(
    request: Request,
    who: AnyReader,
    operator: str | None = Query(default=None),
    target: str | None = Query(default=None, description="key, label, 'host' or JSON"),
    workload_id: RowId | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """Verified best schedules, newest first."""
    target_id = None
    if target is not None:
        target_id = target_id_of(request, target)
        if target_id is None:
            return []
    rows = request.app.state.store.list_schedules(operator, target_id, workload_id, limit)
    return [render(request, row, detail=False) for row in rows]


@router.get("/{schedule_id}", responses=responses(404))
def get_schedule(schedule_id: RowId, request: Request, who: AnyReader) -> dict[str, Any]:
    """One schedule with its MetaSchedule trace and the scheduled TIR."""
    row = request.app.state.store.get_schedule(schedule_id)
    if row is None:
        raise not_found("schedule", schedule_id)
    return render(request, row, detail=True)


@router.get("/{schedule_id}/artifact", response_model=None, responses=responses(304, 404))
def get_artifact(schedule_id: RowId, request: Request, who: AnyReader) -> Response:
    """The compiled shared library of a schedule (``ETag`` and ``X-Content-SHA256``: sha256)."""
    store = request.app.state.store
    row = store.get_schedule(schedule_id)
    if row is None:
        raise not_found("schedule", schedule_id)
    artifact = store.get_artifact(row.artifact_id)
    headers = {"ETag": f'"{artifact.sha256}"', "X-Content-SHA256": artifact.sha256}
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    path = request.app.state.settings.artifacts / artifact.path
    if not path.is_file():
        raise not_found("artifact file", artifact.sha256)
    return FileResponse(
        path,
        media_type="application/octet-stream",
        headers=headers,
        filename=f"tunehub-schedule{row.id}-{artifact.sha256[:12]}.so",
    )
