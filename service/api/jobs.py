"""``/api/v1/jobs``: submit tuning jobs and follow them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from schedules_db import browse, lookups
from schedules_db.values import FINAL_STATES, JobState
from service.api.deps import LimitsDep, QueueDep, ServicesDep, SettingsDep, StoreDep
from service.api.paging import PAGE_HEADERS, Paging, page_headers
from service.app.responses.jobs import JobOut
from service.app.rows import present
from service.app.usecases.cancel import cancel_job as cancel
from service.app.usecases.create_job import JobRequest, OperatorChoice, TirSource
from service.app.usecases.create_job import create_job as create
from service.app.views.jobs import job_view, job_with_parts, live_target_ids
from service.web.auth import AnyReader, Submitter
from service.web.errors import not_found, responses
from service.web.fast_json import json_answer, json_bytes
from service.web.reads import lookup
from service.web.refusals import ISOLATION_RESPONSES, refusal_schema
from service.web.schemas import JobCreate, RowId
from service.web.strict_input import StrictRoute

router = APIRouter(prefix="/jobs", tags=["jobs"], route_class=StrictRoute)


@router.post("", status_code=201, response_model=JobOut, responses=ISOLATION_RESPONSES)
def create_job(
    body: JobCreate,
    who: Submitter,
    store: StoreDep,
    queue: QueueDep,
    settings: SettingsDep,
    limits: LimitsDep,
) -> JobOut:
    """Validate a job completely, then record it and hand it to the target's queue.

    A (workload, target) whose verified best already covers the budget answers at once with
    ``cache_hit: true`` and the schedule. Nothing is written when any field is invalid.
    Raw TIR needs ``submit-code`` and a priority above 0 ``admin`` (403, checked before
    anything is parsed); a target no worker registered needs ``admin`` (422 otherwise); an
    identity at its cap of queued + running jobs gets a 429. The job is the caller's:
    ``submitted_by`` is the identity (the body's field is accepted and ignored).
    """
    return job_view(
        store, settings, create(store, queue, settings, limits, who, _job_request(body))
    )


def _job_request(body: JobCreate) -> JobRequest:
    """The use case's input (``submitted_by`` is ignored: the job is the caller's)."""
    return JobRequest(
        target=body.target,
        trials=body.trials,
        operator=(
            OperatorChoice(body.operator.name, body.operator.params)
            if body.operator is not None
            else None
        ),
        tir=TirSource(body.tir.format, body.tir.source) if body.tir is not None else None,
        priority=body.priority,
        transfer_cost_model=body.transfer_cost_model,
        space=body.space,
    )


# A job's schedule, once it succeeded: read from the first job of a page. (Declared so that a
# fuzzer follows it as written: it infers one from every job's `schedule_id`, nulls included.)
SCHEDULE_LINKS = {
    name: {
        "operationId": operation,
        "parameters": {"path.schedule_id": "$response.body#/0/schedule_id"},
        "description": "the first job's schedule (when it has one)",
    }
    for name, operation in (
        ("GetSchedule", "get_schedule_api_v1_schedules__schedule_id__get"),
        ("GetScheduleArtifact", "get_artifact_api_v1_schedules__schedule_id__artifact_get"),
    )
}


@router.get(
    "",
    response_model=list[JobOut],
    responses={
        200: {"description": "One page of jobs", "headers": PAGE_HEADERS, "links": SCHEDULE_LINKS}
    },
)
def list_jobs(
    request: Request,
    response: Response,
    who: AnyReader,
    store: StoreDep,
    settings: SettingsDep,
    paging: Paging,
    state: Annotated[
        Literal["queued", "running", "succeeded", "failed", "cancelled"] | None,
        Query(description="only jobs in this state"),
    ] = None,
    sort: Annotated[
        Literal["id", "created", "trials", "best"], Query(description="what rows are sorted by")
    ] = "id",
) -> list[JobOut]:
    """Jobs, newest first unless ``sort`` / ``order`` say otherwise, one page (``offset``,
    ``limit``) at a time: ``X-Total-Count`` holds how many match."""
    page = browse.job_page(store, state, sort, paging.descending, paging.offset, paging.limit)
    page_headers(request, response, page)
    live = live_target_ids(store, settings)
    return [job_with_parts(store, settings, *parts, live) for parts in page.rows]


@router.get("/{job_id}", response_model=JobOut, responses=responses(404))
async def get_job(
    job_id: RowId, request: Request, who: AnyReader, services: ServicesDep
) -> Response:
    """One job: state, progress, and the schedule once it succeeded."""
    store, settings = services.store, services.settings  # one dependency on this hot path
    parts = await lookup(store, lookups.job, job_id)
    if parts is None:
        raise not_found("job", job_id)
    if parts.job.state == JobState.QUEUED.value:  # waiting_for asks which targets are live
        body = await run_in_threadpool(job_with_parts, store, settings, *parts)
    else:
        body = job_with_parts(store, settings, *parts)
    return json_answer(request, json_bytes(body))


@router.post("/{job_id}/cancel", response_model=JobOut, responses=responses(404))
def cancel_job(
    job_id: RowId, who: Submitter, store: StoreDep, queue: QueueDep, settings: SettingsDep
) -> JobOut:
    """Cancel a job: at once if queued, after the current batch if running (a flag in the job
    row, read by its worker after every batch; works on every broker). A queued job's message is
    also revoked, as a best effort, where the broker can broadcast. Only the job's submitter
    or an admin may cancel it (403 otherwise)."""
    return job_view(store, settings, cancel(store, queue, who, job_id))


EVENTS_POLL_S = 0.5
EVENTS_KEEPALIVE_S = 15.0
EVENTS_REAUTH_S = 2.0  # how often a stream checks its token is still active
STATES = [s.value for s in JobState]
# One event of the stream (OpenAPI 3.1: a text/event-stream's schema describes each event):
# ``state`` and ``progress`` carry the job as GET /jobs/{id} shows it, ``end`` its id, final
# state and, when the stream ended for its token, why.
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["state", "progress", "end"]},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "required": ["id", "state"],
                "properties": {
                    "id": {"type": "integer"},
                    "state": {"type": "string", "enum": STATES},
                    "reason": {"type": "string"},
                },
            },
        },
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}
EVENTS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The job's events (``retry``, then ``state``/``progress`` events whose "
        "data is the job as ``GET /jobs/{id}`` shows it, keep-alive comments, then ``end``)",
        "content": {"text/event-stream": {"schema": EVENT_SCHEMA}},
    },
    **responses(404),
    429: refusal_schema(
        "the identity (or this server) holds the most open event streams it may",
        {"Retry-After": "seconds to wait"},
    ),
}


@router.get(
    "/{job_id}/events",
    response_class=StreamingResponse,
    response_model=None,
    responses=EVENTS_RESPONSES,
)
async def job_events(
    job_id: RowId, request: Request, who: AnyReader, services: ServicesDep
) -> StreamingResponse:
    """Server-sent events for one job until it is final: ``state`` when its state changes
    (the first event is always one), ``progress`` when trials or the best latency move, then
    ``end``. Each event's data is the job as ``GET /jobs/{id}`` shows it. A client that loses
    the stream (an API restart) reconnects and gets the current state first. A stream opened
    with a token ends (``end`` with ``"reason": "token_<state>"``) within seconds of that token
    being revoked or expiring. An identity holds at most ``TUNEHUB_MAX_STREAMS_PER_IDENTITY``
    open streams on one API process, and the process ``TUNEHUB_MAX_STREAMS`` (429 past
    either)."""
    store, settings, tokens = services.store, services.settings, services.tokens
    if await run_in_threadpool(store.jobs.get, job_id) is None:
        raise not_found("job", job_id)
    release = services.streams.take(who.limit_key)

    def current() -> JobOut:
        job = present(store.jobs.get(job_id), f"job {job_id}")
        return job_view(store, settings, job)

    def token_state() -> str:
        token = tokens.get(who.token.id) if who.token is not None else None
        return "active" if who.token is None else (token.state() if token else "revoked")

    async def stream() -> AsyncIterator[str]:
        try:
            async for event in events():
                yield event
        finally:
            release()

    async def events() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        last_state, last_progress, quiet_since, seq = None, None, time.monotonic(), 0
        checked = time.monotonic()
        while not await request.is_disconnected():
            if who.token is not None and time.monotonic() - checked > EVENTS_REAUTH_S:
                checked = time.monotonic()
                state = await run_in_threadpool(token_state)
                if state != "active":
                    end = {"id": job_id, "state": last_state, "reason": f"token_{state}"}
                    yield f"event: end\ndata: {json.dumps(end)}\n\n"
                    return
            body = await run_in_threadpool(current)
            progress = body["progress"]
            kind = None
            if body["state"] != last_state:
                kind = "state"
            elif progress != last_progress:
                kind = "progress"
            if kind:
                seq += 1
                last_state, last_progress, quiet_since = body["state"], progress, time.monotonic()
                yield f"id: {seq}\nevent: {kind}\ndata: {json.dumps(body)}\n\n"
            elif time.monotonic() - quiet_since > EVENTS_KEEPALIVE_S:
                quiet_since = time.monotonic()
                yield ": keep-alive\n\n"
            if body["state"] in FINAL_STATES:
                yield f"event: end\ndata: {json.dumps({'id': job_id, 'state': body['state']})}\n\n"
                return
            await asyncio.sleep(EVENTS_POLL_S)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        background=BackgroundTask(release),  # also where the stream never started
    )
