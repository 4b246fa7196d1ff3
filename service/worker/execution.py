"""Running one job on a worker, from its claim to its final state.

The broker's consumer (`service.worker.consumer`) calls `run_next(context)` for each delivered
message: it claims the job the store says comes next on the worker's targets and runs it.
`run_job` takes a claimed job through its stages: its inputs read once
(`job_store.load_inputs`), the verification of the neighbour answers served for its workload
(`neighbour_check`), the search (`search_job`), the verification and publication of the best
(`verification`). The job ends `succeeded`, `cancelled` (a cancel requested between batches),
`failed` (with a readable error), or is given up as "lost" when another worker reclaimed it.
While it runs, the worker's one heartbeat (`heartbeat`) keeps the job alive and reports a lost
ownership.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from tvm.target import Target

from schedules_db.blobs import BlobStore, DirectoryBlobs
from schedules_db.store import Store
from schedules_db.values import JobState
from service.shared.settings import default_timing_ms
from service.worker.cost_model_files import CostModelFiles
from service.worker.figures import FiguresKeeper
from service.worker.heartbeat import Heartbeat, JobBeat
from service.worker.job_store import LostOwnership, OwnedJob, load_inputs
from service.worker.model_compile import compile_ready_models
from service.worker.neighbour_check import supersede_answers, verify_neighbour_answers
from service.worker.search_job import search
from service.worker.verification import verify_and_publish
from tuning.hardware.threads import target_threads
from tuning.measure.devices import Measurer, RpcSpec
from tuning.search.loop import SearchCancelled

log = logging.getLogger("tunehub.worker")

LOST, NOT_CLAIMED, IDLE = "lost", "not-claimed", "idle"  # outcomes that are no job state


@dataclass
class WorkerContext:
    """What a worker needs to run jobs (and its one heartbeat, `heartbeat`)."""

    store: Store
    # The worker's local artifact folder: working copies of cost models, and the artifact
    # store itself unless ``blobs`` names another (the database store of a fleet).
    artifact_dir: Path
    worker_name: str
    stale_after: timedelta = timedelta(seconds=90)
    heartbeat_every_s: float = 10.0
    num_trials_per_iter: int = 64
    timing_ms: int = field(default_factory=default_timing_ms)  # each timed kernel run, at least
    seed: int | None = None
    target_ids: tuple[int, ...] = ()
    rpc: RpcSpec | None = None  # measure on a device behind a TVM RPC tracker instead of here
    blobs: BlobStore | None = None  # where artifacts go; None: a directory at artifact_dir
    # Measures a target's roofline figures again before a job while none are trusted (a worker
    # that measures here); None: jobs use the figures the store holds.
    figures: FiguresKeeper | None = None
    heartbeat: Heartbeat = field(init=False)

    def __post_init__(self) -> None:
        if self.blobs is None:
            self.blobs = DirectoryBlobs(self.artifact_dir)
        self.heartbeat = Heartbeat(self.store, self.worker_name, self.heartbeat_every_s)

    @property
    def artifact_store(self) -> BlobStore:
        """Where this worker stores and reads artifacts."""
        assert self.blobs is not None, "set in __post_init__"
        return self.blobs

    def measurer_for(self, canonical: dict[str, Any], work_dir: Path) -> Measurer:
        """Where this worker runs a job's kernels for a target: its jailed runner (files under
        ``work_dir``, on the target's cores), or the RPC tracker's device."""
        kind = str(canonical["kind"])
        threads = target_threads(canonical) or 1
        return Measurer(kind, self.rpc, self.timing_ms, work_dir=work_dir, threads=threads)


def run_next(ctx: WorkerContext) -> str:
    """Compile the models on this worker's targets whose tasks are all tuned, then claim the
    job this worker should run next on its targets (priority, then fair share between
    submitters, then age: `Jobs.claim_next`) and run it, then compile the models that job
    completed. Returns the job's final state, or "idle" when no job is queued for these
    targets (compiles are `model_compile`'s and leave no state here)."""
    compile_ready(ctx)
    job_id = ctx.store.jobs.claim_next(list(ctx.target_ids), ctx.worker_name, ctx.stale_after)
    if job_id is None:
        return IDLE
    state = run_job(ctx, job_id, claimed=True)
    compile_ready(ctx)
    return state


def compile_ready(ctx: WorkerContext) -> None:
    """Compile every ready model on this worker's targets (`model_compile`); a failure is the
    model's, never the worker's: an error reaching the store (a database blip) is logged and
    the worker goes on with its jobs (a claimed compile lapses and is taken over once stale)."""
    try:
        compile_ready_models(
            ctx.store,
            list(ctx.target_ids),
            ctx.worker_name,
            ctx.artifact_store,
            ctx.stale_after,
            ctx.heartbeat_every_s,
        )
    except Exception:  # noqa: BLE001 - see above: never the job's outcome
        log.exception("compiling ready models failed; the worker goes on")


def run_job(ctx: WorkerContext, job_id: int, claimed: bool = False) -> str:
    """Run one job to a final state. Returns the job's state afterwards, "lost" when another
    worker reclaimed it, or "not-claimed". ``claimed``: the caller already made this worker the
    job's owner."""
    if not claimed and not ctx.store.jobs.claim(job_id, ctx.worker_name, ctx.stale_after):
        log.info("job %s: not claimed (owned by another worker or final)", job_id)
        return NOT_CLAIMED
    owned = OwnedJob(ctx.store, job_id, ctx.worker_name)
    work_dir = Path(tempfile.mkdtemp(prefix=f"tunehub-job{job_id}-"))
    try:
        with ctx.heartbeat.beating(job_id) as beat:
            schedule_id = _tune_and_publish(ctx, job_id, owned, beat, work_dir)
        log.info("job %s: succeeded, schedule %s", job_id, schedule_id)
        return JobState.SUCCEEDED.value
    except LostOwnership as err:
        log.warning("%s", err)
        return LOST
    except SearchCancelled:
        owned.cancelled()
        return JobState.CANCELLED.value
    except Exception as err:
        log.error("job %s failed:\n%s", job_id, traceback.format_exc())
        owned.failed(f"{type(err).__name__}: {err}")
        return JobState.FAILED.value
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _tune_and_publish(
    ctx: WorkerContext, job_id: int, owned: OwnedJob, beat: JobBeat, work_dir: Path
) -> int:
    """The job's stages; the published schedule's id."""
    inputs = load_inputs(ctx.store, job_id)
    if ctx.figures is not None:  # before the search: its stop needs a roofline it can trust
        inputs = replace(inputs, target=ctx.figures.refresh(inputs.target, inputs.canonical))
    target = Target(inputs.canonical)
    # Measured, verified and timed in the job's jailed runner, on the cores the target names
    # (TVM's default is half of an x86 machine's CPUs: see tuning.hardware.threads).
    with ctx.measurer_for(inputs.canonical, work_dir) as measurer:
        # A neighbour answer served unverified is checked first: a wrong one is withdrawn.
        verify_neighbour_answers(ctx.store, inputs, target, measurer, work_dir)
        started = time.monotonic()
        search(
            ctx.store,
            inputs,
            target,
            owned,
            beat,
            work_dir,
            measurer=measurer,
            cost_models=CostModelFiles(ctx.store, ctx.artifact_store, ctx.artifact_dir),
            num_trials_per_iter=ctx.num_trials_per_iter,
            seed=ctx.seed,
        )
        owned.stage_took("search", time.monotonic() - started)
        started = time.monotonic()
        schedule_id = verify_and_publish(
            ctx.store, inputs, target, owned, measurer, work_dir, ctx.artifact_store
        )
        owned.stage_took("verification", time.monotonic() - started)
    supersede_answers(ctx.store, inputs)
    return schedule_id
