"""Creating a tuning job: check the caller's rights and quotas, resolve the target, build the
workload (a catalog operator, or raw TIR parsed in isolation), record the job and send it.

Everything is validated before anything is written: an invalid field is a 422 and the store is
left as it was (only the target and workload rows a valid job needs are created).
"""

from __future__ import annotations

from pydantic import ValidationError

from schedules_db import Store
from schedules_db.tokens import ADMIN, SUBMIT_CODE
from schedules_db.values import Job, JobState
from service.api.usecases.dispatch import dispatch_or_defer
from service.app.actors import Identity, require
from service.app.admission import admitted_target, check_active_jobs, record_target
from service.app.untrusted_input import parsed_tir
from service.shared.queue import JobQueue, queue_name
from service.shared.settings import Settings
from service.web.errors import invalid, prefixed
from service.web.schemas import JobCreate, OperatorSpec, TirSpec
from service.web.shared_limits import SharedLimits
from tuning.catalog import get_operator, list_operators
from tuning.catalog.workload import WorkloadSpec, catalog_workload
from tuning.search.spaces import SpaceError, resolve_space


def create_job(
    store: Store,
    queue: JobQueue,
    settings: Settings,
    limits: SharedLimits,
    who: Identity,
    body: JobCreate,
) -> Job:
    """Record the job ``body`` describes for ``who`` and hand it to its target's queue; returns
    the job as stored (``succeeded`` with ``cache_hit`` at once when a verified best already
    covers the budget, else ``queued``).

    Refusals, in the order they are checked: raw TIR without ``submit-code`` or a priority
    above 0 without ``admin`` (403, before anything is parsed); ``who`` at its cap of queued and
    running jobs (429); ``trials`` over ``settings.max_trials``, a target tunehub refuses, or a
    target no worker registered without ``admin`` (422); then the workload and its space (422;
    raw TIR: 429/503 when no isolated parser is free or available). ``submitted_by`` is ``who``.
    """
    _check_rights(body, who)
    target = admitted_target(store, settings, who, body.trials, body.target)
    if body.tir is not None:
        workload = _tir_workload(limits, body.tir, who.limit_key)
    else:
        assert body.operator is not None  # JobCreate holds exactly one of the two
        workload = _catalog_workload(body.operator)
    space = _job_space(body, target.kind)

    stored_target = record_target(store, body.target, target)
    stored_workload = store.catalog.get_or_create_workload(
        workload.shash,
        workload.mod_json,
        workload.operator,
        workload.params,
        workload.flop,
        owner=who.name,
    )
    # Counted again under the identity's lock: two submissions (on any replicas) cannot both
    # take the cap's last place.
    with limits.admissions.admitting(who.name):
        check_active_jobs(store.jobs.count_unfinished(who.name), settings.max_active_jobs)
        job = store.jobs.create(
            stored_workload.id,
            stored_target.id,
            body.trials,
            queue_name(stored_target.key),
            who.name,
            body.priority,
            body.transfer_cost_model,
            space,
            space_must_match=body.space != "auto",
        )
    if job.state == JobState.QUEUED.value:
        dispatch_or_defer(store, queue, job)
    created = store.jobs.get(job.id)
    assert created is not None, "a job just created is never deleted"
    return created


def _check_rights(body: JobCreate, who: Identity) -> None:
    if body.tir is not None:
        require(who, SUBMIT_CODE, ("body", "tir"), "a raw TIR job")
    if body.priority > 0:
        require(who, ADMIN, ("body", "priority"), "a priority above 0")


def _catalog_workload(spec: OperatorSpec) -> WorkloadSpec:
    op = get_operator(spec.name)
    if op is None:
        known = ", ".join(o.name for o in list_operators())
        raise invalid(
            ("body", "operator", "name"),
            f"unknown operator {spec.name!r}; known: {known}",
            "unknown_operator",
            spec.name,
        )
    try:
        params = op.Params.model_validate(spec.params)
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


def _tir_workload(limits: SharedLimits, tir: TirSpec, who: str) -> WorkloadSpec:
    """Raw TIR, parsed and re-derived in isolated children (never in the service's own)."""
    parsed = parsed_tir(limits.parses, tir.format, tir.source, ("body", "tir", "source"), who)
    return WorkloadSpec(
        mod=None,
        shash=parsed.shash,
        mod_json=parsed.mod_json,
        operator=None,
        params={},
        flop=parsed.flop,
    )
