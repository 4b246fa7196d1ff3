"""``/api/v1/jobs``: submit tuning jobs and follow them."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import ValidationError

from schedules_db.store import JobState
from service.errors import invalid, not_found, prefixed
from service.jobqueue import queue_name
from service.schemas import JobCreate, job_json
from tuning.catalog import get_operator, list_operators
from tuning.targets import HOST, TargetError, host_fingerprint, resolve_target
from tuning.tir_sandbox import TirRejected, parse_untrusted
from tuning.workload import WorkloadSpec, catalog_workload

router = APIRouter(prefix="/jobs", tags=["jobs"])
log = logging.getLogger("tunehub.api")


def render_job(request: Request, job: Any) -> dict[str, Any]:
    """A job row with its workload and target, as JSON."""
    store = request.app.state.store
    return job_json(job, store.get_workload(job.workload_id), store.get_target(job.target_id))


@router.post("", status_code=201)
def create_job(body: JobCreate, request: Request) -> dict[str, Any]:
    """Validate a job completely, then record it and hand it to the target's queue.

    A (workload, target) whose verified best already covers the budget answers at once with
    ``cache_hit: true`` and the schedule. Nothing is written when any field is invalid.
    """
    state = request.app.state
    if body.trials > state.settings.max_trials:
        raise invalid(
            ("body", "trials"),
            f"trials must be at most {state.settings.max_trials}",
            "less_than_equal",
            body.trials,
        )
    try:
        target = resolve_target(body.target)
    except TargetError as err:
        raise invalid(("body", "target"), str(err), "invalid_target", body.target) from None
    workload = _tir_workload(body) if body.tir is not None else _catalog_workload(body)

    store = state.store
    fingerprint = host_fingerprint() if body.target == HOST else {}
    target_row = store.get_or_create_target(
        target.canonical, target.kind, target.label, fingerprint
    )
    workload_row = store.get_or_create_workload(
        workload.shash, workload.mod_json, workload.operator, workload.params, workload.flop
    )
    job = store.create_job(
        workload_row.id, target_row.id, body.trials, queue_name(target_row.key), body.submitted_by
    )
    if job.state == JobState.QUEUED.value:
        try:
            state.queue.enqueue(job.id, job.queue)
            store.mark_enqueued(job.id)
        except Exception:  # the broker is down: the job is recorded; the reaper sends it later
            log.exception("could not enqueue job %s; the reaper will retry", job.id)
    return render_job(request, store.get_job(job.id))


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


def _tir_workload(body: JobCreate) -> WorkloadSpec:
    """Raw TIR, parsed in a limited child process (never in the service's own)."""
    try:
        parsed = parse_untrusted(body.tir.format, body.tir.source)
    except TirRejected as err:
        raise invalid(("body", "tir", "source"), str(err), "invalid_tir") from None
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
    state: str | None = Query(default=None),
    limit: int = Query(default=100, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """Jobs, newest first."""
    if state is not None and state not in {s.value for s in JobState}:
        raise invalid(("query", "state"), f"unknown state {state!r}", "enum", state)
    return [render_job(request, job) for job in request.app.state.store.list_jobs(state, limit)]


@router.get("/{job_id}")
def get_job(job_id: int, request: Request) -> dict[str, Any]:
    """One job: state, progress, and the schedule once it succeeded."""
    job = request.app.state.store.get_job(job_id)
    if job is None:
        raise not_found("job", job_id)
    return render_job(request, job)


@router.post("/{job_id}/cancel")
def cancel_job(job_id: int, request: Request) -> dict[str, Any]:
    """Cancel a job: at once if queued, after the current batch if running."""
    job = request.app.state.store.request_cancel(job_id)
    if job is None:
        raise not_found("job", job_id)
    return render_job(request, job)
