"""A job's search: its space, its warm start (neighbours' seeds, a transferred cost model), and
MetaSchedule run over the store for what is left of its budget.

Budgets are totals per (workload, target, TVM series, space): what is stored already (from
earlier jobs, or from this one before its worker was lost) seeds the search's population
(top-k, of either space), is not measured again, and counts against the budget. Between two
measured batches the job reports progress (and learns whether it still owns the job) and stops
when a cancel was requested.

Budgets follow the gap to the roofline: a search whose best reaches `AT_ROOFLINE` of the
workload's roofline (`tuning.hardware.roofline`: its FLOP at the target's measured peak, its
bytes at its measured bandwidth) stops there, and a job whose stored best is there already
measures nothing: its trials would buy nothing a kernel can still gain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tvm.s_tir.meta_schedule import TuneContext

from schedules_db.store import Store
from service.worker.cost_model_files import CostModelFiles
from service.worker.heartbeat import JobBeat
from service.worker.job_store import JobInputs, LostOwnership, OwnedJob
from service.worker.search_storage import StoreSearchStorage, stored_workload
from service.worker.store_database import StoreDatabase
from tuning.catalog import get_operator
from tuning.hardware.host import physical_cores
from tuning.hardware.intrinsics import load_tensor_intrinsics
from tuning.hardware.roofline import AT_ROOFLINE, at_roofline
from tuning.ir import layout_free_operands, structural_hash
from tuning.measure.devices import Measurer
from tuning.search.loop import BatchReport, SearchCancelled, run_search
from tuning.search.seeding import neighbour_seeds
from tuning.search.spaces import space_generator, space_module

log = logging.getLogger("tunehub.worker")


class AtRoofline(Exception):
    """Raised between two batches when the search's best is at the workload's roofline."""


def search(
    store: Store,
    inputs: JobInputs,
    target: Any,
    owned: OwnedJob,
    beat: JobBeat,
    work_dir: Path,
    *,
    measurer: Measurer,
    cost_models: CostModelFiles,
    num_trials_per_iter: int,
    seed: int | None,
) -> None:
    """Search ``inputs``' workload on ``target`` (its `tvm.target.Target`) until the job's
    budget is stored, every measured candidate committed to the store as it comes. Raises
    `LostOwnership` (another worker reclaimed the job) or `SearchCancelled` between batches."""
    job, workload, target_row = inputs.job, inputs.workload, inputs.target
    already = inputs.stored_in_space
    if already:
        log.info("job %s: continuing from %d stored trials", job.id, already)
    if job.trials <= already:
        return  # the budget is stored already: verification only
    current = store.schedules.best(workload.id, target_row.id)
    if current is not None and at_roofline(current.latency_us, inputs.roofline_us):
        log.info("job %s: the published best is at the roofline (%.1f us): nothing to search",
                 job.id, inputs.roofline_us)  # fmt: skip
        return
    operator = get_operator(workload.operator) if workload.operator else None
    # A catalog operator names its weights; a user function (a model's task) marks them itself.
    weights = operator.constant_operands if operator else layout_free_operands(inputs.mod)
    search_mod = space_module(inputs.mod, job.space, weights)
    storage = StoreSearchStorage(store, target_row.id)
    seeds: dict[int, list[Any]] = {}
    if job.transfer_cost_model and inputs.new_on_target:
        # Warm start of a workload new to this target: its neighbours' best schedules, refitted.
        seeds[workload.id] = _neighbour_seeds(job.id, storage, inputs, target, search_mod)
    database = StoreDatabase(
        store,
        target_row.id,
        job.id,
        job.space,
        {structural_hash(search_mod): workload.id},
        seeds,
    )
    cost_model_path = None
    if job.transfer_cost_model:
        cost_model_path = _transferred_model(job.id, storage, inputs, target, cost_models, owned)
    try:
        run_search(
            search_mod,
            target,
            database,
            job.trials - already,
            str(work_dir),
            _on_batch(store, inputs, owned, beat),
            num_trials_per_iter=num_trials_per_iter,
            seed=seed,
            runner=measurer.runner(),
            cost_model_path=cost_model_path,
            space=job.space,
            # A warm start measures its best seeds first: the evolutionary search would only
            # measure those its cost model happens to rank above its own mutants.
            measure_first=seeds.get(workload.id, []),
            stored=database,
        )
    except AtRoofline:
        log.info("job %s: the best reached %.0f%% of the roofline (%.1f us): the search stops",
                 job.id, AT_ROOFLINE * 100, inputs.roofline_us)  # fmt: skip


def _on_batch(
    store: Store, inputs: JobInputs, owned: OwnedJob, beat: JobBeat
) -> Callable[[BatchReport], None]:
    """What the job does after each measured batch: check it still owns the job, report
    progress (the best of every stored record of the workload on the target), stop on cancel."""
    job, workload_id, target_id = inputs.job, inputs.workload.id, inputs.target.id

    def on_batch(report: BatchReport) -> None:
        if beat.lost:
            raise LostOwnership(job.id)
        stored_best = store.records.top_k(workload_id, target_id, 1)
        best = stored_best[0].mean_run_us if stored_best else report.best_us
        done = inputs.stored_in_space + report.trials_done
        owned.report_progress(done, best)
        if owned.cancel_requested():
            raise SearchCancelled()
        log.info(
            "job %s: %d/%d trials, best %.1f us", job.id, done, job.trials, best or float("nan")
        )
        # This search's own measurement: a stored record may be an import's claim.
        if at_roofline(report.best_us, inputs.roofline_us):
            raise AtRoofline()

    return on_batch


def _neighbour_seeds(
    job_id: int, storage: StoreSearchStorage, inputs: JobInputs, target: Any, search_mod: Any
) -> list[Any]:
    """Seed traces from the workload's stored neighbours (`tuning.search.seeding`); none on
    error."""
    load_tensor_intrinsics([dict(target.export())])
    try:
        context = TuneContext(
            mod=search_mod,
            target=target,
            space_generator=space_generator(inputs.job.space, target, search_mod),
        ).clone()
        postprocs = list(context.space_generator.postprocs)
        seeds = neighbour_seeds(storage, stored_workload(inputs.workload), search_mod, postprocs)
    except Exception:  # noqa: BLE001 - seeds are an optimisation, never a reason to fail
        log.exception("job %s: seeding from neighbours failed; starting without", job_id)
        return []
    if seeds:
        log.info("job %s: %d seed schedule(s) from neighbouring workloads", job_id, len(seeds))
    return seeds


def _transferred_model(
    job_id: int,
    storage: StoreSearchStorage,
    inputs: JobInputs,
    target: Any,
    cost_models: CostModelFiles,
    owned: OwnedJob,
) -> Path | None:
    """The target's transferred cost model (retrained first when enough records arrived), or
    None: too few records yet, or training failed (the search then starts cold)."""
    try:
        path = cost_models.current(storage, inputs.target.key, target, physical_cores())
    except Exception:  # noqa: BLE001 - a model is an optimisation, never a reason to fail
        log.exception("job %s: cost model transfer failed; starting cold", job_id)
        return None
    if path is not None:
        owned.started_from_cost_model(path.name)
        log.info("job %s: starting from cost model %s", job_id, path.name)
    return path
