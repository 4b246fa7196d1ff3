"""MetaSchedule search: evolutionary search guided by the XGBoost cost model, with our builder,
a quiet logger, and a callback that reports every measured batch."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuning.hardware.host import physical_cores
from tuning.hardware.intrinsics import load_tensor_intrinsics
from tuning.measure.devices import Measurer
from tuning.search.builder import make_builder
from tuning.search.fresh_candidates import FreshCandidates, passes_gate
from tuning.search.spaces import PACKED, PLAIN, space_generator
from tuning.search.storage import StoredTraces
from tuning.search.tile_seeds import bf16_seeds, micro_kernel_seeds, register_tile_seeds
from tuning.traces import FAILED_RUN_SECS, run_failed

log = logging.getLogger("tunehub.search")


class SearchCancelled(Exception):
    """Raised from the progress callback to stop a search between two batches."""


@dataclass
class BatchReport:
    """What one measured batch adds to a search."""

    trials_done: int  # candidates measured by this search so far
    batch_size: int
    batch_failures: int
    best_us: float | None  # best mean latency seen by this search so far


OnBatch = Callable[[BatchReport], None]


def _mean_secs(result: Any) -> float | None:
    if result.error_msg is not None or not result.run_secs:
        return None
    secs = [float(x) for x in result.run_secs]
    mean = sum(secs) / len(secs)
    return None if run_failed(secs) or math.isnan(mean) else mean


class _Stop:
    """What ``on_batch`` raised: TVM's FFI turns a Python exception raised inside a callback
    into a plain RuntimeError, so the original is kept here and re-raised by `run_search`."""

    error: BaseException | None = None


class _Progress:
    """Counts a search's measured trials and its best, and reports each batch to ``on_batch``
    (whatever ``on_batch`` raises is kept in ``stop`` and re-raised)."""

    def __init__(self, on_batch: OnBatch, stop: _Stop) -> None:
        self.on_batch, self.stop = on_batch, stop
        self.trials_done = 0
        self.best_secs: float | None = None

    def batch(self, runner_results: list[Any]) -> None:
        """Account for one measured batch and report it."""
        means = [_mean_secs(r) for r in runner_results]
        ok = [m for m in means if m is not None]
        if ok and (self.best_secs is None or min(ok) < self.best_secs):
            self.best_secs = min(ok)
        self.trials_done += len(runner_results)
        try:
            self.on_batch(
                BatchReport(
                    trials_done=self.trials_done,
                    batch_size=len(runner_results),
                    batch_failures=len(means) - len(ok),
                    best_us=None if self.best_secs is None else self.best_secs * 1e6,
                )
            )
        except BaseException as err:
            self.stop.error = err
            raise


def _progress_callback(progress: _Progress) -> Any:
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class ProgressCallback(PyMeasureCallback):
        """Reports each batch after the default callbacks stored its records."""

        def apply(
            self,
            task_scheduler: Any,
            task_id: int,
            measure_candidates: list[Any],
            builder_results: list[Any],
            runner_results: list[Any],
        ) -> None:
            progress.batch(list(runner_results))

    return ProgressCallback()


def batch_size(trials: int, num_trials_per_iter: int) -> int:
    """Candidates per measured batch: at most ``num_trials_per_iter``, and small enough that a
    job reports progress (and can be cancelled) at least four times, but not below 8."""
    return max(1, min(num_trials_per_iter, trials, max(8, math.ceil(trials / 4))))


POPULATION_PER_CANDIDATE = 32
MAX_POPULATION = 512  # MetaSchedule's default
MIN_POPULATION = 64  # above the evolutionary search's 50 fresh samples per round


def population_size(batch: int) -> int:
    """The evolutionary search's population for batches of ``batch`` candidates: 32 per
    candidate, between 64 and MetaSchedule's 512 (jobs of 64 trials or more, in batches of 16 or
    more, keep 512). Evolving 512 schedules (5 generations, each postprocessed and scored) to
    pick 4 took 2.3 s a round on a 2-core VM, more than building and measuring the 4; 128 take
    0.9 s."""
    return max(MIN_POPULATION, min(MAX_POPULATION, POPULATION_PER_CANDIDATE * batch))


def run_search(
    mod: Any,
    target: Any,
    database: Any,
    trials: int,
    work_dir: str,
    on_batch: OnBatch,
    *,
    num_trials_per_iter: int = 64,
    seed: int | None = None,
    num_cores: int | None = None,
    runner: Any | None = None,
    cost_model_path: Path | None = None,
    space: str = PLAIN,
    measure_first: Sequence[Any] = (),
    stored: StoredTraces | None = None,
) -> None:
    """Tune ``mod`` (one PrimFunc "main") for ``trials`` measured candidates.

    Every measured candidate is committed to ``database`` by MetaSchedule's default callbacks
    before ``on_batch`` sees the batch. ``on_batch`` may raise `SearchCancelled` to stop.
    ``runner`` measures candidates (default: a jailed runner of its own, `tuning.measure.devices`;
    an `RPCRunner` for remote devices).
    ``cost_model_path``: a saved `XGBModel` to start from (`tuning.search.cost_model`) instead of an
    untrained one. ``space``: the design space (`tuning.search.spaces`); ``mod`` must already be the
    space's module (`tuning.search.spaces.space_module`). ``measure_first``: traces (postprocessed,
    for ``mod``), of which the first batch's worth is measured before the evolutionary search
    (a warm start's seeds: MetaSchedule only measures database candidates its cost model ranks
    first); in the packed space, micro-kernel seeds (`tuning.search.micro_kernels`) and
    register-tile seeds (`tuning.search.tile_seeds`) fill the rest of that batch. Seeds count
    against ``trials``, are stored, and train the cost model like any batch. ``stored``: what
    the storage already holds (usually ``database`` itself, the worker's adapter): no candidate
    it reports stored, seed or mutant, is measured again.
    """
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.measure_callback import MeasureCallback
    from tvm.s_tir.meta_schedule.search_strategy import SearchStrategy
    from tvm.s_tir.meta_schedule.tune import tune_tasks

    # With the TVM imports above (it subclasses MetaSchedule's PySearchStrategy).

    # The schedule rules look tensor intrinsics up by name: register the families this target
    # can use (a no-op after the first time; see tuning.hardware.intrinsics).
    load_tensor_intrinsics([dict(target.export())])
    cores = num_cores or physical_cores()
    first_size = batch_size(trials, num_trials_per_iter)
    generator = space_generator(space, target, mod)
    first = first_batch(mod, target, generator, stored, space, cores, measure_first, first_size)
    rest = trials - len(first)
    per_batch = batch_size(max(rest, 1), num_trials_per_iter)
    strategy = SearchStrategy.create("evolutionary", population_size=population_size(per_batch))
    if stored is not None:  # never measure a stored trace again
        strategy = FreshCandidates(strategy, stored.is_stored)
    context = TuneContext(
        mod=mod,
        target=target,
        space_generator=generator,
        search_strategy=strategy,
        task_name="main",
        rand_state=-1 if seed is None else seed,
        num_threads=cores,
        logger=logging.getLogger("tunehub.metaschedule"),
    ).clone()
    builder = make_builder(max_workers=cores)
    cost_model = XGBModel(num_tuning_cores=cores)
    if cost_model_path is not None:
        cost_model.load(str(cost_model_path))
    own_measurer = None
    if runner is None:  # a jailed runner of this search's own, on ``cores`` threads
        own_measurer = Measurer(str(target.kind.name), work_dir=Path(work_dir), threads=cores)
        runner = own_measurer.runner()
    stop = _Stop()
    progress = _Progress(on_batch, stop)
    callbacks = list(MeasureCallback.create("default")) + [_progress_callback(progress)]
    try:
        if first:
            _measure_first_batch(context, first, builder, runner, database, cost_model, progress)
        if rest > 0:
            tune_tasks(
                tasks=[context],
                task_weights=[1.0],
                work_dir=work_dir,
                max_trials_global=rest,
                max_trials_per_task=rest,
                num_trials_per_iter=per_batch,
                builder=builder,
                runner=runner,
                database=database,
                cost_model=cost_model,
                measure_callbacks=callbacks,
                task_scheduler="round-robin",
            )
    except Exception:
        if stop.error is not None:
            raise stop.error from None
        raise
    finally:
        builder.shutdown()
        pool = getattr(runner, "pool", None)  # TVM's RPCRunner has one
        if pool is not None:
            pool.shutdown()
        if own_measurer is not None:
            own_measurer.close()


def first_batch(
    mod: Any,
    target: Any,
    generator: Any,
    stored: StoredTraces | None,
    space: str,
    cores: int,
    given: Sequence[Any],
    size: int,
) -> list[Any]:
    """What the search measures before its evolutionary rounds, at most ``size`` traces: the
    ``given`` ones (a warm start's seeds), then, in the packed space, its bf16 kernels' seeds
    (`tuning.search.bf16_dot`, `tuning.search.amx_tiles`), micro-kernel seeds
    (`tuning.search.micro_kernels`) and register-tile seeds (`tuning.search.tile_seeds`); each
    once, none that ``stored`` already holds and none the trace gate refuses."""
    from tvm.s_tir.meta_schedule import TuneContext

    first = list(given)
    if space == PACKED and len(first) < size:
        try:
            # A throwaway context: generating the design spaces initialises ``generator``.
            context = TuneContext(mod=mod, target=target, space_generator=generator.clone())
            first += bf16_seeds(context)  # none outside bf16 matmuls on a bf16 unit
            first += micro_kernel_seeds(context)
            first += register_tile_seeds(context, cores)
        except Exception:  # noqa: BLE001 - seeds are an optimisation, never a reason to fail
            log.exception("the space's seeds failed; the search starts without them")
    unique = list({str(trace): trace for trace in first}.values())  # a seed of both kinds once
    unique = [trace for trace in unique if passes_gate(trace)]
    if stored is not None:
        unique = [trace for trace in unique if not stored.is_stored(mod, trace)]
    return unique[:size]


def _measure_first_batch(
    context: Any,
    traces: list[Any],
    builder: Any,
    runner: Any,
    database: Any,
    cost_model: Any,
    progress: _Progress,
) -> None:
    """Build and run ``traces`` on ``context``'s module as one batch, the way MetaSchedule's
    task scheduler does: records go to ``database``, results update ``cost_model``, and
    ``progress`` reports the batch (and may stop the job)."""
    import shutil

    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.database import TuningRecord
    from tvm.s_tir.meta_schedule.runner import RunnerInput, RunnerResult
    from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate
    from tvm.s_tir.schedule import Schedule

    workload = database.commit_workload(context.mod)
    candidates = []
    for trace in traces:
        sch = Schedule(context.mod)
        trace.apply_to_schedule(sch, remove_postproc=False)
        # As MetaSchedule's own candidates: the arguments the kernel takes once the layout
        # rewrite's preproc block is gone (a packed weight in its packed shape).
        args_info = ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
        candidates.append(MeasureCandidate(sch, args_info))
    built = builder.build([BuilderInput(c.sch.mod, context.target) for c in candidates])
    # The runner names devices as MetaSchedule's task scheduler does ("cpu", "cuda", ...).
    device = str(tvm.runtime.device(context.target.get_target_device_type(), 0)).split(":")[0]
    ok = [i for i, b in enumerate(built) if b.error_msg is None]
    inputs = [RunnerInput(built[i].artifact_path, device, candidates[i].args_info) for i in ok]
    futures = dict(zip(ok, runner.run(inputs) if inputs else [], strict=True))
    results = []
    for i, b in enumerate(built):
        if b.error_msg is not None:
            results.append(RunnerResult(None, b.error_msg))
            continue
        results.append(futures[i].result())
        shutil.rmtree(Path(b.artifact_path).parent, ignore_errors=True)
    for candidate, result in zip(candidates, results, strict=True):
        if result.error_msg is not None:
            log.warning("a first-batch candidate failed: %s", result.error_msg.strip()[-2000:])
        run_secs = list(result.run_secs) if result.error_msg is None else [FAILED_RUN_SECS]
        database.commit_tuning_record(
            TuningRecord(
                candidate.sch.trace, workload, run_secs, context.target, candidate.args_info
            )
        )
    cost_model.update(context, candidates, results)
    progress.batch(results)
