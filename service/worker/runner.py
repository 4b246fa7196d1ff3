"""Running one job on a worker: claim it, search, verify the best, export it, publish it.

The worker process calls `run_job(context, job_id)` for each delivered message; a delivery that
does not win the claim returns at once (another worker owns the job, or it is final).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from schedules_db.store import Store
from schedules_db.values import USER, JobState, NewSchedule
from tuning.catalog import get_operator
from tuning.catalog.dtypes import random_operand, widen_tolerance
from tuning.catalog.workload import catalog_workload
from tuning.hardware.devices import Measurer, RpcSpec
from tuning.hardware.intrinsics import load_tensor_intrinsics
from tuning.hardware.targets import current_tvm_series
from tuning.hardware.threads import pin_runtime_threads, target_threads
from tuning.ir import arg_specs, load_mod, structural_hash
from tuning.publish.artifacts import publish
from tuning.publish.packing import split_packed
from tuning.publish.verify import (
    VerificationError,
    apply_trace,
    build_library,
    check_close,
    run_module,
    time_module,
)
from tuning.sandbox.tir_checks import check_user_function
from tuning.sandbox.user_tir import check_stored
from tuning.search.loop import BatchReport, SearchCancelled, run_search
from tuning.search.spaces import space_module

log = logging.getLogger("tunehub.worker")

VERIFY_CANDIDATES = 5  # how many of the fastest records to try before giving up


@dataclass
class WorkerContext:
    """What a worker needs to run jobs."""

    store: Store
    artifact_dir: Path
    worker_name: str
    stale_after: timedelta = timedelta(seconds=90)
    heartbeat_every_s: float = 10.0
    num_trials_per_iter: int = 64
    seed: int | None = None
    target_ids: tuple[int, ...] = ()
    current_job_id: int | None = None  # what the worker runs now (its registry heartbeat says)
    rpc: RpcSpec | None = None  # measure on a device behind a TVM RPC tracker instead of here

    def measurer_for(self, kind: str) -> Measurer:
        """Where this worker runs kernels of a target kind."""
        return Measurer(kind, self.rpc)


class LostOwnership(Exception):
    """The job was reclaimed by another worker (this one stopped heart-beating for too long)."""


class _Heartbeat(threading.Thread):
    """Refreshes the job's heartbeat while the search runs (batches can take minutes)."""

    def __init__(self, store: Store, job_id: int, worker: str, every_s: float) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.store, self.job_id, self.worker, self.every_s = store, job_id, worker, every_s
        self.stopped = threading.Event()
        self.lost = False

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                if not self.store.jobs.heartbeat(self.job_id, self.worker):
                    self.lost = True
                    return
            except Exception:  # a database hiccup: try again next beat
                log.exception("heartbeat of job %s failed", self.job_id)


class _Reference:
    """Expected outputs: numpy for catalog operators, the unscheduled function for raw TIR."""

    def __init__(self, workload: Any, untuned_module: Any, device: Any, func: Any) -> None:
        self.device = device
        self.func = func
        self.untuned_module = untuned_module
        self.op = get_operator(workload.operator) if workload.operator else None
        self.params = self.op.Params.model_validate(workload.params) if self.op else None
        rng = np.random.default_rng(0)
        specs = arg_specs(func)
        self.out_shape, self.out_dtype = specs[-1]
        if self.op is not None:
            self.inputs, self.expected = self.op.make_case(self.params, func, rng)
            self.rtol, self.atol = self.op.tolerance(self.params)
        else:
            self.inputs = [random_operand(s, d, rng) for s, d in specs[:-1]]
            self.expected = run_module(
                untuned_module, device, self.inputs, self.out_shape, self.out_dtype
            )
            self.rtol, self.atol = widen_tolerance(1e-4, 1e-5, self.out_dtype)

    def check(self, module: Any, packed: Any = ()) -> float:
        """Max error of the module's output (through its pack functions and ``main_packed``
        when ``packed`` lists packed weights)."""
        actual = run_module(
            module, self.device, self.inputs, self.out_shape, self.out_dtype, packed
        )
        return check_close(actual, self.expected, self.rtol, self.atol)


def run_next(ctx: WorkerContext) -> str:
    """Claim the job this worker should run next on its targets (priority, then fair share
    between submitters, then age: `Jobs.claim_next`) and run it. Returns its final state, or
    "idle" when no job is queued for these targets."""
    job_id = ctx.store.jobs.claim_next(list(ctx.target_ids), ctx.worker_name, ctx.stale_after)
    if job_id is None:
        return "idle"
    return run_job(ctx, job_id, claimed=True)


def run_job(ctx: WorkerContext, job_id: int, claimed: bool = False) -> str:
    """Run one job to a final state. Returns the job's state afterwards (or "not-claimed").
    ``claimed``: the caller already made this worker the job's owner."""
    store = ctx.store
    if not claimed and not store.jobs.claim(job_id, ctx.worker_name, ctx.stale_after):
        log.info("job %s: not claimed (owned by another worker or final)", job_id)
        return "not-claimed"
    ctx.current_job_id = job_id
    heartbeat = _Heartbeat(store, job_id, ctx.worker_name, ctx.heartbeat_every_s)
    heartbeat.start()
    work_dir = Path(tempfile.mkdtemp(prefix=f"tunehub-job{job_id}-"))
    try:
        schedule_id = _tune_and_publish(ctx, job_id, work_dir, heartbeat)
        if schedule_id is None:
            raise LostOwnership(f"job {job_id} was reclaimed by another worker")
        log.info("job %s: succeeded, schedule %s", job_id, schedule_id)
        return JobState.SUCCEEDED.value
    except LostOwnership as err:
        log.warning("%s", err)
        return "lost"
    except SearchCancelled:
        store.jobs.cancel_running(job_id, ctx.worker_name)
        return JobState.CANCELLED.value
    except Exception as err:
        log.error("job %s failed:\n%s", job_id, traceback.format_exc())
        store.jobs.fail(job_id, ctx.worker_name, f"{type(err).__name__}: {err}")
        return JobState.FAILED.value
    finally:
        ctx.current_job_id = None
        heartbeat.stopped.set()
        shutil.rmtree(work_dir, ignore_errors=True)


def _checked_module(store: Store, workload: Any, target_id: int) -> Any:
    """The workload's module. A catalog workload's is built again from the catalog (the
    stored JSON is never loaded; a row whose hash the catalog does not give is refused). A
    user's (raw TIR, imported) is first loaded, checked and its unverified imported traces
    replayed in an isolated child, so a crafted document kills that child, not this worker;
    traces that do not replay are dropped from the store. Then it is loaded here and checked
    again before anything builds it."""
    if workload.origin != USER:
        op = get_operator(workload.operator)
        spec = catalog_workload(op.name, op.Params.model_validate(workload.params))
        if spec.shash != workload.shash:
            raise ValueError("the stored catalog workload is not what the catalog builds")
        return spec.mod
    imported = [row for row in store.records.list_records(target_id, workload.id) if row.unverified]
    bad = check_stored(
        workload.mod_json, workload.shash, [json.loads(row.trace_json) for row in imported]
    )
    if bad:
        dropped = store.records.drop_unverified([imported[i].id for i in bad])
        log.warning(
            "workload %s: dropping %d imported record(s) that do not replay", workload.id, dropped
        )
    mod = load_mod(workload.mod_json)
    check_user_function(mod["main"])
    return mod


def _tune_and_publish(
    ctx: WorkerContext, job_id: int, work_dir: Path, heartbeat: _Heartbeat
) -> int | None:
    from service.worker.store_database import StoreDatabase

    store = ctx.store
    job = store.jobs.get(job_id)
    workload = store.catalog.get_workload(job.workload_id)
    target_row = store.catalog.get_target(job.target_id)
    from tvm.target import Target

    canonical = json.loads(target_row.canonical_json)
    target = Target(canonical)
    threads = target_threads(canonical)
    if threads is not None and ctx.rpc is None:
        # Measured, verified and timed on the cores the target names (TVM's default is half of
        # an x86 machine's CPUs: see tuning.hardware.threads).
        log.info("job %s: kernels run on %d threads", job_id, pin_runtime_threads(threads))
    mod = _checked_module(store, workload, target_row.id)
    operator = get_operator(workload.operator) if workload.operator else None
    search_mod = space_module(mod, job.space, operator.constant_operands if operator else ())
    # Budgets are totals per (workload, target, TVM series, space): what is stored already
    # (from earlier jobs, or from this one before its worker was lost) seeds the search's
    # population (top-k, of either space), is not measured again, and counts against the budget.
    already = store.records.count(target_row.id, workload.id, space=job.space)
    seeds = {}
    if job.transfer_cost_model and not store.records.count(target_row.id, workload.id):
        # Warm start of a workload new to this target: its neighbours' best schedules, refitted.
        seeds[workload.id] = _neighbour_seeds(
            ctx, job_id, workload, target_row, target, search_mod, job.space
        )
    database = StoreDatabase(
        store,
        target_row.id,
        job_id,
        job.space,
        {structural_hash(search_mod): workload.id},
        seeds,
    )
    if already:
        log.info("job %s: continuing from %d stored trials", job_id, already)

    def on_batch(report: BatchReport) -> None:
        if heartbeat.lost:
            raise LostOwnership(f"job {job_id} was reclaimed by another worker")
        stored_best = store.records.top_k(workload.id, target_row.id, 1)
        best = stored_best[0].mean_run_us if stored_best else report.best_us
        done = already + report.trials_done
        if not store.jobs.update_progress(job_id, ctx.worker_name, done, best):
            raise LostOwnership(f"job {job_id} was reclaimed by another worker")
        if store.jobs.cancel_was_requested(job_id):
            raise SearchCancelled()
        log.info(
            "job %s: %d/%d trials, best %.1f us", job_id, done, job.trials, best or float("nan")
        )

    if job.trials > already:
        cost_model_path = None
        if job.transfer_cost_model:
            cost_model_path = _transferred_model(ctx, job_id, target_row, target)
        run_search(
            search_mod,
            target,
            database,
            job.trials - already,
            str(work_dir),
            on_batch,
            num_trials_per_iter=ctx.num_trials_per_iter,
            seed=ctx.seed,
            runner=ctx.measurer_for(target_row.kind).runner(),
            cost_model_path=cost_model_path,
            space=job.space,
            # A warm start measures its best seeds first: the evolutionary search would only
            # measure those its cost model happens to rank above its own mutants.
            measure_first=seeds.get(workload.id, []),
        )
    return _verify_and_publish(ctx, job_id, workload, target_row, target, mod, work_dir)


def _neighbour_seeds(
    ctx: WorkerContext,
    job_id: int,
    workload: Any,
    target_row: Any,
    target: Any,
    search_mod: Any,
    space: str,
) -> list[Any]:
    """Seed traces from the workload's stored neighbours (`tuning.search.seeding`); none on
    error."""
    from tvm.s_tir.meta_schedule import TuneContext

    from tuning.search.seeding import neighbour_seeds
    from tuning.search.spaces import space_generator

    load_tensor_intrinsics([dict(target.export())])
    try:
        context = TuneContext(
            mod=search_mod,
            target=target,
            space_generator=space_generator(space, target, search_mod),
        ).clone()
        seeds = neighbour_seeds(
            ctx.store, workload, target_row.id, search_mod, list(context.space_generator.postprocs)
        )
    except Exception:  # noqa: BLE001 - seeds are an optimisation, never a reason to fail
        log.exception("job %s: seeding from neighbours failed; starting without", job_id)
        return []
    if seeds:
        log.info("job %s: %d seed schedule(s) from neighbouring workloads", job_id, len(seeds))
    return seeds


def _with_drop_in(
    session: Any, reference: _Reference, mod: Any, record: Any, target: Any, work_dir: Path
) -> tuple[Any, Path, float]:
    """The packed winner's published library: pack functions, ``main_packed`` and the drop-in
    ``main`` (the user's layouts, packing inside the call), each entry point verified."""
    split = split_packed(apply_trace(mod, record.trace_json))
    path = work_dir / f"published-{record.id}.so"
    loaded = session.load(build_library(split.mod, target, path))
    error = max(reference.check(loaded.module), reference.check(loaded.module, split.packed))
    return split, path, error


def _transferred_model(ctx: WorkerContext, job_id: int, target_row: Any, target: Any) -> Any:
    """The target's transferred cost model (retrained first when enough records arrived), or
    None: too few records yet, or training failed (the search then starts cold)."""
    from tuning.hardware.targets import physical_cores
    from tuning.search.cost_model import refresh

    try:
        path = refresh(
            ctx.store, target_row.id, target_row.key, target, ctx.artifact_dir, physical_cores()
        )
    except Exception:  # noqa: BLE001 - a model is an optimisation, never a reason to fail
        log.exception("job %s: cost model transfer failed; starting cold", job_id)
        return None
    if path is not None:
        ctx.store.jobs.set_cost_model(job_id, ctx.worker_name, path.name)
        log.info("job %s: starting from cost model %s", job_id, path.name)
    return path


def _verify_and_publish(
    ctx: WorkerContext,
    job_id: int,
    workload: Any,
    target_row: Any,
    target: Any,
    mod: Any,
    work_dir: Path,
) -> int | None:
    store = ctx.store
    func = mod["main"]
    specs = arg_specs(func)
    measurer = ctx.measurer_for(target_row.kind)
    with measurer.session() as session:
        untuned = session.load(build_library(mod, target, work_dir / "untuned.so"))
        untuned_time = time_module(untuned.module, untuned.device, specs)
        reference = _Reference(workload, untuned.module, untuned.device, func)
        failures: list[str] = []
        verified: list[tuple[float, Any, Any, float, Path]] = []
        # The search's best measurement is the luckiest of many noisy ones; re-time every
        # verified candidate of the top k (of either space) here, side by side, and publish the
        # fastest of those. A packed candidate is checked through pack_<i> then ``main_packed``
        # and timed as deployed (``main_packed`` alone); the winner's published library adds
        # the drop-in ``main``, checked too (`_with_drop_in`).
        for record in store.records.top_k(workload.id, target_row.id, VERIFY_CANDIDATES):
            path = work_dir / f"candidate-{record.id}.so"
            try:
                split = split_packed(apply_trace(mod, record.trace_json), drop_in=False)
                loaded = session.load(build_library(split.mod, target, path))
                error = reference.check(loaded.module, split.packed)
            except VerificationError as err:
                failures.append(f"record {record.id}: {err}")
                log.warning("job %s: record %s failed verification: %s", job_id, record.id, err)
                continue
            entry_specs = arg_specs(split.mod[split.entry])
            latency = time_module(
                loaded.module, loaded.device, entry_specs, entry=split.entry
            ).median_us
            verified.append((latency, record, split, error, path))
        if not verified:
            detail = "; ".join(failures) or "no candidate was measured successfully"
            raise VerificationError(f"no candidate passed verification: {detail}")
        # The plain function competes too, timed like the candidates (before and after them):
        # on tiny kernels a short search may find nothing faster (threads cost more than they
        # save), and nothing slower than the plain function is ever served.
        untuned_after = time_module(untuned.module, untuned.device, specs).median_us
        untuned_us = (untuned_time.median_us + untuned_after) / 2
        untuned_error = reference.check(untuned.module)
        latency, record, split, error, path = min(verified, key=lambda item: item[0])
        if split.packed and untuned_us >= latency:
            split, path, error = _with_drop_in(session, reference, mod, record, target, work_dir)
    scheduled, packed = split.mod, split.packed
    if untuned_us < latency:
        log.info("job %s: the plain function (%.2f us) beat every candidate (%.2f us)",
                 job_id, untuned_us, latency)  # fmt: skip
        latency, record, scheduled, packed, error = untuned_us, None, mod, [], untuned_error
        path = work_dir / "untuned.so"
    artifact = publish(ctx.artifact_dir, path)
    new = NewSchedule(
        record_id=record.id if record is not None else None,
        latency_us=latency,
        untuned_latency_us=untuned_us,
        max_abs_error=error,
        tir=scheduled.script(),
        artifact_sha256=artifact.sha256,
        artifact_size=artifact.size,
        artifact_path=artifact.relpath,
        tvm_series=current_tvm_series(),
        space=record.space if record is not None else "plain",
        packed_params=[param.as_json() for param in packed],
    )
    return store.schedules.publish(job_id, ctx.worker_name, new)
