"""``/api/v1/schedules``: verified best schedules and their compiled artifacts."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, Response
from starlette.concurrency import run_in_threadpool

from schedules_db import lookups
from schedules_db.keys import target_key
from service.auth import AnyReader
from service.errors import invalid, not_found, responses
from service.fast_json import compact_json, json_answer, json_bytes, with_raw_fields
from service.reads import lookup
from service.schemas import RowId, schedule_json
from service.strict_input import StrictRoute
from tuning.hardware.targets import TargetError, resolve_target

router = APIRouter(prefix="/schedules", tags=["schedules"], route_class=StrictRoute)


def target_id_of(request: Request, target: str) -> int | None:
    """The target id named by key, label, "host" or JSON; None if it is unknown here."""
    store = request.app.state.store
    row = store.catalog.find_target(target)
    if row is None:
        try:
            resolved = resolve_target(target)
        except TargetError as err:
            raise invalid(("query", "target"), str(err), "invalid_target", target) from None
        row = store.catalog.find_target(target_key(resolved.canonical))
    return None if row is None else row.id


def render(request: Request, row: Any, detail: bool) -> dict[str, Any]:
    """A schedule row with its workload, target, artifact and record, as JSON."""
    store = request.app.state.store
    return schedule_json(
        row,
        store.catalog.get_workload(row.workload_id),
        store.catalog.get_target(row.target_id),
        store.schedules.get_artifact(row.artifact_id),
        store.records.get(row.record_id) if detail and row.record_id is not None else None,
        detail,
    )


def detail_json(parts: lookups.ScheduleParts) -> bytes:
    """A schedule as ``schedule_json(..., detail=True)`` shows it, as JSON bytes: the stored
    trace text goes in as it is (compacted once per text), not parsed and re-serialised."""
    body = schedule_json(*parts, detail=False)
    trace = compact_json(parts.record.trace_json) if parts.record else "[[],[]]"
    return with_raw_fields(body, {"trace": trace, "tir": json.dumps(parts.schedule.tir)})


@router.get("", response_model=list[dict[str, Any]])
async def list_schedules(
    request: Request,
    who: AnyReader,
    operator: str | None = Query(default=None),
    target: str | None = Query(default=None, description="key, label, 'host' or JSON"),
    workload_id: RowId | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> Response:
    """Verified best schedules, newest first."""
    target_id = None
    if target is not None:
        target_id = await run_in_threadpool(target_id_of, request, target)
        if target_id is None:
            return json_answer(request, b"[]")
    store = request.app.state.store
    found = await lookup(store, lookups.schedules, operator, target_id, workload_id, limit)
    return json_answer(request, json_bytes([schedule_json(*p, detail=False) for p in found]))


@router.get("/{schedule_id}", response_model=dict[str, Any], responses=responses(304, 404))
async def get_schedule(schedule_id: RowId, request: Request, who: AnyReader) -> Response:
    """One schedule with its MetaSchedule trace and the scheduled TIR; its ``ETag`` answers
    ``If-None-Match`` with a 304."""
    parts = await lookup(request.app.state.store, lookups.schedule, schedule_id)
    if parts is None:
        raise not_found("schedule", schedule_id)
    return json_answer(request, detail_json(parts), etag=True)


@router.get("/{schedule_id}/artifact", response_model=None, responses=responses(304, 404))
async def get_artifact(schedule_id: RowId, request: Request, who: AnyReader) -> Response:
    """The compiled shared library of a schedule (``ETag`` and ``X-Content-SHA256``: sha256)."""
    artifact = await lookup(request.app.state.store, lookups.artifact, schedule_id)
    if artifact is None:
        raise not_found("schedule", schedule_id)
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
        filename=f"tunehub-schedule{schedule_id}-{artifact.sha256[:12]}.so",
    )
