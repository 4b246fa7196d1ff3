"""``/api/v1/schedules``: verified best schedules and their compiled artifacts."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from schedules_db import browse, lookups
from schedules_db.browse import ScheduleFilter
from service.api.deps import ServicesDep, StoreDep
from service.api.files import STORE_FAILURES, artifact_response
from service.api.paging import PAGE_HEADERS, Paging, page_headers
from service.app.admission import target_id_of
from service.app.refusals import NOT_TUNED
from service.app.responses.schedules import ScheduleDetail, ScheduleOut, schedule_json
from service.app.usecases.best_schedule import best_schedule
from service.web.auth import AnyReader
from service.web.errors import not_found, responses
from service.web.fast_json import compact_json, json_answer, json_bytes, with_raw_fields
from service.web.reads import lookup
from service.web.schemas import SHASH_PATTERN, OptionalTargetQuery, RowId, TargetQuery
from service.web.strict_input import StrictRoute

ScheduleSort = Literal["id", "date", "gflops", "latency", "speedup", "peak", "trials"]

router = APIRouter(prefix="/schedules", tags=["schedules"], route_class=StrictRoute)

ARTIFACT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The compiled shared library",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        "headers": {
            "ETag": {"description": "the sha256, quoted", "schema": {"type": "string"}},
            "X-Content-SHA256": {"description": "the sha256", "schema": {"type": "string"}},
        },
    },
    **STORE_FAILURES,
    **responses(304, 404),
}


class NotTunedOut(BaseModel):
    """The 404 of ``GET /schedules/best``: what has no verified schedule."""

    detail: str
    type: str = NOT_TUNED
    workload: str
    target: dict[str, str | None]
    operator: str | None
    params: dict[str, Any]
    tvm_series: str | None


BEST_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": NotTunedOut, "description": "Nothing verified for this key (type not_tuned)"}
}


def schedule_detail_bytes(parts: lookups.ScheduleDetail) -> bytes:
    """A schedule as `service.app.responses.schedules.schedule_detail_json` shows it, as JSON
    bytes: the stored trace text goes in as it is (compacted once per text), not parsed and
    re-serialised."""
    body = schedule_json(*parts)
    trace = compact_json(parts.record.trace_json) if parts.record else "[[],[]]"
    return with_raw_fields(body, {"trace": trace, "tir": json.dumps(parts.schedule.tir)})


@router.get(
    "",
    response_model=list[ScheduleOut],
    responses={200: {"description": "One page of schedules", "headers": PAGE_HEADERS}},
)
async def list_schedules(
    request: Request,
    who: AnyReader,
    store: StoreDep,
    paging: Paging,
    operator: Annotated[str | None, Query(max_length=64)] = None,
    target: OptionalTargetQuery = None,
    workload_id: RowId | None = None,
    layout: Annotated[str | None, Query(max_length=16, description="the layout param")] = None,
    dtype: Annotated[str | None, Query(max_length=16, description="the dtype param")] = None,
    space: Annotated[str | None, Query(max_length=16, description="the search space")] = None,
    origin: Annotated[
        Literal["catalog", "user"] | None,
        Query(description="provenance: a catalog operator or user TIR / a model's task"),
    ] = None,
    sort: Annotated[ScheduleSort, Query(description="what rows are sorted by")] = "id",
) -> Response:
    """Verified best schedules, newest first unless ``sort`` / ``order`` say otherwise, one page
    (``offset``, ``limit``) at a time: ``X-Total-Count`` holds how many match the filters."""
    target_id = None
    if target is not None:
        target_id = await run_in_threadpool(target_id_of, store, target)
        if target_id is None:
            response = json_answer(request, b"[]")
            response.headers["X-Total-Count"] = "0"
            return response
    where = ScheduleFilter(operator, target_id, workload_id, layout, dtype, space, origin)
    page = await lookup(
        store, browse.schedule_page, where, sort, paging.descending, paging.offset, paging.limit
    )
    response = json_answer(request, json_bytes([schedule_json(*parts) for parts in page.rows]))
    page_headers(request, response, page)
    return response


@router.get("/best", response_model=ScheduleOut, responses=BEST_RESPONSES)
def get_best(
    who: AnyReader,
    store: StoreDep,
    target: TargetQuery,
    operator: Annotated[str | None, Query(max_length=64)] = None,
    params: Annotated[
        str | None, Query(max_length=4096, description='the operator\'s params: {"M": 32}')
    ] = None,
    workload: Annotated[
        str | None, Query(pattern=SHASH_PATTERN, description="a structural hash instead")
    ] = None,
) -> ScheduleOut:
    """The verified best schedule of a catalog operator with its params (or of a workload
    hash) on a target, in this server's TVM series: what ``tunehub fetch --operator`` downloads.
    The service builds the operator's workload itself (params are checked as for a job)."""
    return schedule_json(*best_schedule(store, target, operator, params, workload))


@router.get("/{schedule_id}", response_model=ScheduleDetail, responses=responses(304, 404))
async def get_schedule(
    schedule_id: RowId, request: Request, who: AnyReader, store: StoreDep
) -> Response:
    """One schedule with its MetaSchedule trace and the scheduled TIR; its ``ETag`` answers
    ``If-None-Match`` with a 304."""
    parts = await lookup(store, lookups.schedule, schedule_id)
    if parts is None:
        raise not_found("schedule", schedule_id)
    return json_answer(request, schedule_detail_bytes(parts), etag=True)


@router.get(
    "/{schedule_id}/artifact",
    response_class=Response,
    response_model=None,
    responses=ARTIFACT_RESPONSES,
)
async def get_artifact(
    schedule_id: RowId, request: Request, who: AnyReader, services: ServicesDep
) -> Response:
    """The compiled shared library of a schedule (``ETag`` and ``X-Content-SHA256``: sha256)."""
    artifact = await lookup(services.store, lookups.artifact, schedule_id)
    if artifact is None:
        raise not_found("schedule", schedule_id)
    name = f"tunehub-schedule{schedule_id}-{artifact.sha256[:12]}.so"
    return await artifact_response(request, services.artifacts, artifact, name)
