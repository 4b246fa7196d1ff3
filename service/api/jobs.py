"""``/api/v1/jobs``: submit tuning jobs and follow them."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from schedules_db import lookups
from schedules_db.values import FINAL_STATES, JobState
from service.auth import (
    ADMIN,
    SUBMIT_CODE,
    AnyReader,
    Identity,
    Submitter,
    check_target,
    forbidden,
    require,
)
from service.errors import invalid, not_found, prefixed, responses
from service.fast_json import json_answer, json_bytes
from service.queue import queue_name
from service.quotas import check_active_jobs
from service.reads import lookup
from service.schemas import JobCreate, RowId, job_json
from service.strict_input import StrictRoute
from service.untrusted_input import ISOLATION_RESPONSES, parsed_tir
from tuning.catalog import get_operator, list_operators
from tuning.catalog.workload import WorkloadSpec, catalog_workload
from tuning.hardware.targets import (
    HOST,
    ResolvedTarget,
    TargetError,
    host_fingerprint,
    resolve_target,
)
from tuning.search.spaces import SpaceError, resolve_space

router = APIRouter(prefix="/jobs", tags=["jobs"], route_class=StrictRoute)
log = logging.getLogger("tunehub.api")


def render_job(request: Request, job: Any, live: set[int] | None = None) -> dict[str, Any]:
    """A job row with its workload and target, as JSON (see `job_body`)."""
    store = request.app.state.store
    workload, target = (
        store.catalog.get_workload(job.workload_id),
        store.catalog.get_target(job.target_id),
    )
    return job_body(request, job, workload, target, live)


def job_body(
    request: Request, job: Any, workload: Any, target: Any, live: set[int] | None = None
) -> dict[str, Any]:
    """A job with its workload and target, as JSON; a queued job whose target no live worker
    serves says so in ``waiting_for`` (``live``: the served target ids, when the caller renders
    many jobs)."""
    body = job_json(job, workload, target)
    if job.state == JobState.QUEUED.value:
        if live is None:
            live = _live_targets(request)
        if job.target_id not in live:
            body["waiting_for"] = f"no live worker serves target {target.label} ({target.key})"
        else:
            body["waiting_for"] = "a free worker of this target"
    return body


def _live_targets(request: Request) -> set[int]:
    stale_after = timedelta(seconds=request.app.state.settings.stale_after_s)
    return request.app.state.store.fleet.live_target_ids(stale_after)


@router.post("", status_code=201, responses=ISOLATION_RESPONSES)
def create_job(body: JobCreate, request: Request, who: Submitter) -> dict[str, Any]:
    """Validate a job completely, then record it and hand it to the target's queue.

    A (workload, target) whose verified best already covers the budget answers at once with
    ``cache_hit: true`` and the schedule. Nothing is written when any field is invalid.
    Raw TIR needs ``submit-code`` and a priority above 0 ``admin`` (403, checked before
    anything is parsed); a target no worker registered needs ``admin`` (422 otherwise); an
    identity at its cap of queued + running jobs gets a 429. The job is the caller's:
    ``submitted_by`` is the identity (the body's field is accepted and ignored).
    """
    state = request.app.state
    _check_rights(body, who)
    check_active_jobs(state.store.jobs.count_unfinished(who.name), state.settings.max_active_jobs)
    if body.trials > state.settings.max_trials:
        raise invalid(
            ("body", "trials"),
            f"trials must be at most {state.settings.max_trials}",
            "less_than_equal",
            body.trials,
        )
    target = resolve_job_target(body.target, state.store)
    check_target(who, target.canonical, state.store)
    workload = (
        _tir_workload(body, who.limit_key) if body.tir is not None else _catalog_workload(body)
    )
    space = _job_space(body, target.kind)

    store = state.store
    fingerprint = host_fingerprint() if body.target == HOST else {}
    target_row = store.catalog.get_or_create_target(
        target.canonical, target.kind, target.label, fingerprint
    )
    workload_row = store.catalog.get_or_create_workload(
        workload.shash, workload.mod_json, workload.operator, workload.params, workload.flop
    )
    job = store.jobs.create(
        workload_row.id,
        target_row.id,
        body.trials,
        queue_name(target_row.key),
        who.name,
        body.priority,
        body.transfer_cost_model,
        space,
        space_must_match=body.space != "auto",
    )
    if job.state == JobState.QUEUED.value:
        try:
            task_id = state.queue.enqueue(job.id, job.queue)
            store.jobs.mark_enqueued(job.id, task_id)
        except Exception:  # the broker is down: the job is recorded; the reaper sends it later
            log.exception("could not enqueue job %s; the reaper will retry", job.id)
    return render_job(request, store.jobs.get(job.id))


def _check_rights(body: JobCreate, who: Identity) -> None:
    if body.tir is not None:
        require(who, SUBMIT_CODE, ("body", "tir"), "a raw TIR job")
    if body.priority > 0:
        require(who, ADMIN, ("body", "priority"), "a priority above 0")


def resolve_job_target(spec: str | dict[str, Any], store: Any) -> ResolvedTarget:
    """ "host", a JSON target, or the key or label of a target the store knows (as
    ``GET /targets`` lists them, e.g. ``znver4-2c``; a label names one target).

    A target tunehub refuses (`resolve_target`; a stored one too) is a 422 ``invalid_target``
    at ``body.target``, inside a JSON object at the offending attribute (``body.target.mcpu``).
    """
    named = None
    if isinstance(spec, str) and spec != HOST and not spec.lstrip().startswith("{"):
        named = store.catalog.find_target(spec)
    try:
        return resolve_target(json.loads(named.canonical_json) if named else spec)
    except TargetError as err:
        loc = ("body", "target", *err.loc) if isinstance(spec, dict) else ("body", "target")
        reason = str(err)
        if isinstance(spec, str) and named is None:
            known = (
                ", ".join(sorted(row.label for row in store.catalog.list_targets())) or "none yet"
            )
            reason = f"{err} (known target names: {known})"
        raise invalid(loc, reason, "invalid_target", spec) from None


def _catalog_workload(body: JobCreate) -> WorkloadSpec:
    op = get_operator(body.operator.name)
    if op is None:
        known = ", ".join(o.name for o in list_operators())
        raise invalid(
            ("body", "operator", "name"),
            f"unknown operator {body.operator.name!r}; known: {known}",
            "unknown_operator",
            body.operator.name,
        )
    try:
        params = op.Params.model_validate(body.operator.params)
    except ValidationError as err:
        raise prefixed(err.errors(include_url=False), ("body", "operator", "params")) from None
    return catalog_workload(op.name, params)


def _job_space(body: JobCreate, target_kind: str) -> str:
    """The search space the job gets (``auto`` resolved); a 422 when ``packed`` is asked for a
    workload without weights or a target that is not a CPU."""
    op = get_operator(body.operator.name) if body.operator is not None else None
    constant_operands = op.constant_operands if op is not None else ()
    try:
        return resolve_space(body.space, constant_operands, target_kind)
    except SpaceError as err:
        raise invalid(("body", "space"), str(err), "space_unavailable", body.space) from None


def _tir_workload(body: JobCreate, who: str) -> WorkloadSpec:
    """Raw TIR, parsed and re-derived in isolated children (never in the service's own)."""
    parsed = parsed_tir(body.tir.format, body.tir.source, ("body", "tir", "source"), who)
    return WorkloadSpec(
        mod=None,
        shash=parsed.shash,
        mod_json=parsed.mod_json,
        operator=None,
        params={},
        flop=parsed.flop,
    )


@router.get("")
def list_jobs(
    request: Request,
    who: AnyReader,
    state: str | None = Query(default=None),
    limit: int = Query(default=100, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """Jobs, newest first."""
    if state is not None and state not in {s.value for s in JobState}:
        raise invalid(("query", "state"), f"unknown state {state!r}", "enum", state)
    live = _live_targets(request)
    jobs = request.app.state.store.jobs.list_jobs(state, limit)
    return [render_job(request, job, live) for job in jobs]


@router.get("/{job_id}", response_model=dict[str, Any], responses=responses(404))
async def get_job(job_id: RowId, request: Request, who: AnyReader) -> Response:
    """One job: state, progress, and the schedule once it succeeded."""
    store = request.app.state.store
    parts = await lookup(store, lookups.job, job_id)
    if parts is None:
        raise not_found("job", job_id)
    if parts.job.state == JobState.QUEUED.value:  # waiting_for asks which targets are live
        body = await run_in_threadpool(job_body, request, *parts)
    else:
        body = job_body(request, *parts)
    return json_answer(request, json_bytes(body))


@router.post("/{job_id}/cancel", responses=responses(404))
def cancel_job(job_id: RowId, request: Request, who: Submitter) -> dict[str, Any]:
    """Cancel a job: at once if queued, after the current batch if running (a flag in the job
    row, read by its worker after every batch; works on every broker). A queued job's message is
    also revoked, as a best effort, where the broker can broadcast. Only the job's submitter
    or an admin may cancel it (403 otherwise)."""
    store = request.app.state.store
    before = store.jobs.get(job_id)
    if before is None:
        raise not_found("job", job_id)
    if not who.owns(before.submitted_by):
        raise forbidden(
            ADMIN,
            ("path", "job_id"),
            f"job {job_id} was submitted by {before.submitted_by}; only they or an admin may "
            "cancel it",
            "not_owner",
        )
    job = store.jobs.request_cancel(job_id)
    if job is None:
        raise not_found("job", job_id)
    if before.state == JobState.QUEUED.value and job.state == JobState.CANCELLED.value:
        request.app.state.queue.revoke(job.task_id)
    return render_job(request, job)


EVENTS_POLL_S = 0.5
EVENTS_KEEPALIVE_S = 15.0


@router.get("/{job_id}/events", responses=responses(404))
async def job_events(job_id: RowId, request: Request, who: AnyReader) -> StreamingResponse:
    """Server-sent events for one job until it is final: ``state`` when its state changes
    (the first event is always one), ``progress`` when trials or the best latency move, then
    ``end``. Each event's data is the job as ``GET /jobs/{id}`` shows it. A client that loses
    the stream (an API restart) reconnects and gets the current state first."""
    store = request.app.state.store
    if await run_in_threadpool(store.jobs.get, job_id) is None:
        raise not_found("job", job_id)

    async def stream() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        last_state, last_progress, quiet_since, seq = None, None, time.monotonic(), 0
        while not await request.is_disconnected():
            job = await run_in_threadpool(store.jobs.get, job_id)
            body = await run_in_threadpool(render_job, request, job)
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
    )
