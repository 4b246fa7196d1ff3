"""Creating a tuning job: check the caller's rights and quotas, resolve the target, build the
workload (a catalog operator, or raw TIR parsed in isolation), record the job and send it.

Everything is validated before anything is written: an invalid field is an `InvalidInput` (a
422) and the store is left as it was (only the target and workload rows a valid job needs are
created).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from schedules_db import Store
from schedules_db.tokens import ADMIN, SUBMIT_CODE
from schedules_db.values import Job, JobState
from service.app.actors import Identity, require
from service.app.admission import admitted_target, admitting, record_target
from service.app.ports import SubmissionLimits
from service.app.precision import mentions_bf16, require_bf16_unit
from service.app.refusals import InvalidFields, InvalidInput
from service.app.untrusted_input import parsed_tir
from service.app.usecases.dispatch import dispatch_or_defer
from service.shared.queue import JobQueue, queue_name
from service.shared.settings import Settings
from tuning.catalog import get_operator, list_operators
from tuning.catalog.dtypes import BFLOAT16
from tuning.catalog.workload import WorkloadSpec, catalog_workload
from tuning.hardware.targets import ResolvedTarget
from tuning.search.spaces import SpaceError, resolve_space


@dataclass(frozen=True)
class OperatorChoice:
    """A catalog operator and its parameters (validated by the operator's own model)."""

    name: str
    params: dict[str, Any]


@dataclass(frozen=True)
class TirSource:
    """Raw TIR: its format (``tvmscript`` or ``json``) and text."""

    format: str
    source: str


@dataclass(frozen=True)
class JobRequest:
    """What a job submission asks for: exactly one of ``operator`` and ``tir``."""

    target: str | dict[str, Any]
    trials: int
    operator: OperatorChoice | None = None
    tir: TirSource | None = None
    priority: int = 0
    transfer_cost_model: bool = True
    space: str = "auto"


def create_job(
    store: Store,
    queue: JobQueue,
    settings: Settings,
    limits: SubmissionLimits,
    who: Identity,
    request: JobRequest,
) -> Job:
    """Record the job ``request`` describes for ``who`` and hand it to its target's queue; returns
    the job as stored (``succeeded`` with ``cache_hit`` at once when a verified best already
    covers the budget, else ``queued``).

    Refusals, in the order they are checked: raw TIR without ``submit-code`` or a priority
    above 0 without ``admin`` (403, before anything is parsed); ``who`` at its cap of queued and
    running jobs (429); ``trials`` over ``settings.max_trials``, a target tunehub refuses, or a
    target no worker registered without ``admin`` (422); then the workload and its space (422,
    ``missing_cpu_feature`` for bf16 work on a target without a bf16 unit; raw TIR: 422
    ``tir_too_large`` before it is parsed, 429 while ``who`` parses already or
    its parse-time quota is in debt, 429/503 when no isolated parser comes free or none is
    available). ``submitted_by`` is ``who``.
    """
    _check_rights(request, who)
    target = admitted_target(store, settings, who, request.trials, request.target)
    if request.tir is not None:
        workload = _tir_workload(limits, settings, request.tir, who.limit_key)
        if mentions_bf16(workload.mod_json):
            require_bf16_unit(target, ("body", "tir"), BFLOAT16)
    else:
        assert request.operator is not None  # a request holds exactly one of the two
        workload = _catalog_workload(request.operator)
        _check_precision(workload, target)
    space = _job_space(request, target.kind)

    stored_target = record_target(store, request.target, target)
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
    with admitting(store, settings, limits.admissions, who):
        job = store.jobs.create(
            stored_workload.id,
            stored_target.id,
            request.trials,
            queue_name(stored_target.key),
            who.name,
            request.priority,
            request.transfer_cost_model,
            space,
            space_must_match=request.space != "auto",
        )
    if job.state == JobState.QUEUED.value:
        dispatch_or_defer(store, queue, job)
    created = store.jobs.get(job.id)
    assert created is not None, "a job just created is never deleted"
    return created


def _check_rights(request: JobRequest, who: Identity) -> None:
    if request.tir is not None:
        require(who, SUBMIT_CODE, ("body", "tir"), "a raw TIR job")
    if request.priority > 0:
        require(who, ADMIN, ("body", "priority"), "a priority above 0")


def _catalog_workload(spec: OperatorChoice) -> WorkloadSpec:
    op = get_operator(spec.name)
    if op is None:
        known = ", ".join(o.name for o in list_operators())
        raise InvalidInput(
            ("body", "operator", "name"),
            f"unknown operator {spec.name!r}; known: {known}",
            "unknown_operator",
            spec.name,
        )
    try:
        params = op.Params.model_validate(spec.params)
    except ValidationError as err:
        raise InvalidFields(err.errors(include_url=False), ("body", "operator", "params")) from None
    return catalog_workload(op.name, params)


def _check_precision(workload: WorkloadSpec, target: ResolvedTarget) -> None:
    """A 422 when a bfloat16 operator is asked of a target without a bf16 unit: its kernel
    would be a float32 kernel reading bf16 (or one built for an instruction it lacks)."""
    if workload.params.get("dtype") == BFLOAT16:
        require_bf16_unit(target, ("body", "operator", "params", "dtype"), BFLOAT16)


def _job_space(request: JobRequest, target_kind: str) -> str:
    """The search space the job gets (``auto`` resolved); a 422 when ``packed`` is asked for a
    workload without weights or a target that is not a CPU."""
    op = get_operator(request.operator.name) if request.operator is not None else None
    constant_operands = op.constant_operands if op is not None else ()
    try:
        return resolve_space(request.space, constant_operands, target_kind)
    except SpaceError as err:
        raise InvalidInput(
            ("body", "space"), str(err), "space_unavailable", request.space
        ) from None


def _tir_workload(
    limits: SubmissionLimits, settings: Settings, tir: TirSource, who: str
) -> WorkloadSpec:
    """Raw TIR, parsed and re-derived in isolated children (never in the service's own)."""
    loc = ("body", "tir", "source")
    parsed = parsed_tir(limits, settings, tir.format, tir.source, loc, who)
    return WorkloadSpec(
        mod=None,
        shash=parsed.shash,
        mod_json=parsed.mod_json,
        operator=None,
        params={},
        flop=parsed.flop,
    )
