"""A job's verification and publication: the fastest stored candidates verified against the
reference and re-timed side by side with the plain function and the current best, the fastest
of them published.

The search's best measurement is the luckiest of many noisy ones, so every verified candidate
of the top `VERIFY_CANDIDATES` (of either space) is timed again here (timed anew while its runs
spread more than 10%: another process held the cores; the quietest timing kept, its spread
published with the latency), and the plain
(unscheduled) function competes too: nothing slower than it is ever served. So does the
(workload, target)'s current best: a record's stored figure may be a claim (an import's
``run_secs``), so a candidate replaces the best only by out-measuring it here, on this worker,
in the same session. A packed candidate
is checked through its ``pack_<i>`` functions then ``main_packed`` and timed as deployed
(``main_packed`` alone); the winner's published library adds the drop-in ``main`` (the user's
layouts, packing inside the call), checked too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedules_db.blobs import BlobStore
from schedules_db.store import Store
from schedules_db.values import NewSchedule, Record, Workload
from service.worker.job_store import JobInputs, OwnedJob
from tuning.catalog import get_operator
from tuning.catalog.dtypes import random_operand, summed_tolerance, widen_tolerance
from tuning.checks.library_check import UnsafeLibrary
from tuning.checks.trace_gate import UnsafeTrace
from tuning.hardware.bf16 import reads_packed_bf16
from tuning.hardware.host import current_tvm_series
from tuning.ir import arg_specs, reduction_length
from tuning.measure.devices import KernelSession, Measurer
from tuning.measure.kernel_jail import KernelRunFailed
from tuning.measure.timing import Timing, quiet_timing
from tuning.publish.packing import PackedParam, split_packed
from tuning.publish.verify import VerificationError, apply_trace, build_library, check_close

log = logging.getLogger("tunehub.worker")

# What fails one candidate (and not the job): a wrong output, a trace the gate refuses, a
# library the check refuses, a kernel that crashes or hangs the jailed runner.
CANDIDATE_FAILURES = (VerificationError, UnsafeTrace, UnsafeLibrary, KernelRunFailed)

VERIFY_CANDIDATES = 5  # how many of the fastest records to try before giving up


class Reference:
    """Expected outputs: numpy for catalog operators (each with its own tolerance), the
    unscheduled function for raw TIR and model tasks (`summed_tolerance` of the terms its longest
    reduction sums, `tuning.ir.reduction_length`)."""

    def __init__(self, workload: Workload, session: KernelSession, untuned: Any, func: Any) -> None:
        self.session = session
        rng = np.random.default_rng(0)
        specs = arg_specs(func)
        self.out_shape, self.out_dtype = specs[-1]
        op = get_operator(workload.operator) if workload.operator else None
        if op is not None:
            params = op.Params.model_validate(workload.params)
            self.inputs, self.expected = op.make_case(params, func, rng)
            self.rtol, self.atol = op.tolerance(params)
        else:
            self.inputs = [random_operand(s, d, rng) for s, d in specs[:-1]]
            self.expected = session.run(untuned, self.inputs, self.out_shape, self.out_dtype)
            # As the catalog's contractions: a fixed atol of 1e-5 refused ResNet-18's fastest
            # 3x3x512 convs, correct but summing in another order (errors 6e-5 to 1.3e-4).
            tolerance = summed_tolerance(reduction_length(func))
            self.rtol, self.atol = widen_tolerance(*tolerance, self.out_dtype)

    def check(self, kernel: Any, packed: list[PackedParam] | tuple[()] = ()) -> float:
        """Max error of a loaded kernel's output (through its pack functions and
        ``main_packed`` when ``packed`` lists packed weights)."""
        actual = self.session.run(kernel, self.inputs, self.out_shape, self.out_dtype, packed)
        return check_close(actual, self.expected, self.rtol, self.atol)


@dataclass(frozen=True)
class Winner:
    """What is published: the fastest verified candidate, or the plain function."""

    record: Record | None  # None: the plain function won
    latency_us: float
    latency_spread: float  # its timed runs' spread (`tuning.publish.verify.Timing.spread`)
    untuned_us: float
    max_abs_error: float
    scheduled: Any  # the IRModule of the published library
    packed: list[PackedParam]
    library: Path


def verify_and_publish(
    store: Store,
    inputs: JobInputs,
    target: Any,
    owned: OwnedJob,
    measurer: Measurer,
    work_dir: Path,
    blobs: BlobStore,
) -> int:
    """Verify the job's fastest stored candidates and publish the winner (`Winner`); its
    schedule id. Raises `VerificationError` when no candidate passes, `LostOwnership` when
    another worker owns the job now."""
    top = store.records.top_k(inputs.workload.id, inputs.target.id, VERIFY_CANDIDATES)
    current = store.schedules.best(inputs.workload.id, inputs.target.id)
    best_id = current.record_id if current is not None else None
    if best_id is not None and all(r.id != best_id for r in top):
        record = store.records.get(best_id)
        if record is not None:
            top.append(record)  # the best to beat, re-measured beside the candidates
    winner = _pick_winner(inputs, top, target, measurer, work_dir)
    artifact = blobs.put(winner.library, ".so")
    record = winner.record
    _note_above_peak(inputs, winner.latency_us)
    return owned.publish(
        NewSchedule(
            record_id=record.id if record is not None else None,
            latency_us=winner.latency_us,
            latency_spread=winner.latency_spread,
            untuned_latency_us=winner.untuned_us,
            max_abs_error=winner.max_abs_error,
            tir=winner.scheduled.script(),
            artifact_sha256=artifact.sha256,
            artifact_size=artifact.size,
            artifact_path=artifact.path,
            tvm_series=current_tvm_series(),
            space=record.space if record is not None else "plain",
            packed_params=[param.as_json() for param in winner.packed],
        )
    )


def _note_above_peak(inputs: JobInputs, latency_us: float) -> None:
    """Log a verified kernel faster than its target's measured peak. The peak is not raised to
    it: a peak measured under load is measured again before the next job
    (`service.worker.figures`), and a kernel may beat it honestly (an algorithm that does fewer
    multiplies than the FLOP it is counted for, as Winograd does); what is shown of it is
    capped at 100% of the peak."""
    peak = inputs.target.peak_gflops
    gflops = inputs.workload.flop / (latency_us * 1e3) if latency_us > 0 else 0.0
    if peak and gflops > peak:
        log.info("target %s: a kernel ran at %.1f effective GFLOPS, above the measured peak "
                 "%.1f", inputs.target.id, gflops, peak)  # fmt: skip


def _pick_winner(
    inputs: JobInputs, top: list[Record], target: Any, measurer: Measurer, work_dir: Path
) -> Winner:
    """Verify and time ``top`` and the plain function, side by side on the job's device."""
    job_id, mod = inputs.job.id, inputs.mod
    func = mod["main"]
    specs = arg_specs(func)

    with measurer.session() as session:

        def timed(kernel: Any, specs: list[tuple[list[int], str]], entry: str = "main") -> Timing:
            return quiet_timing(lambda: session.time(kernel, specs, entry))

        untuned = session.load(build_library(mod, target, work_dir / "untuned.so"))
        untuned_before = timed(untuned, specs)
        reference = Reference(inputs.workload, session, untuned, func)
        failures: list[str] = []
        verified: list[tuple[Timing, Record, Any, float, Path]] = []
        for record in top:
            path = work_dir / f"candidate-{record.id}.so"
            try:
                split = split_packed(apply_trace(mod, record.trace_json), drop_in=False)
                kernel = session.load(build_library(split.mod, target, path))
                error = reference.check(kernel, split.packed)
            except CANDIDATE_FAILURES as err:
                failures.append(f"record {record.id}: {err}")
                log.warning("job %s: record %s failed verification: %s", job_id, record.id, err)
                continue
            entry_specs = arg_specs(split.mod[split.entry])
            verified.append((timed(kernel, entry_specs, split.entry), record, split, error, path))
        if not verified:
            detail = "; ".join(failures) or "no candidate was measured successfully"
            raise VerificationError(f"no candidate passed verification: {detail}")
        # The plain function is timed like the candidates, before and after them: on tiny
        # kernels a short search may find nothing faster (threads cost more than they save).
        untuned_after = timed(untuned, specs)
        untuned_us = (untuned_before.median_us + untuned_after.median_us) / 2
        untuned_error = reference.check(untuned)
        timing, best, split, error, path = min(verified, key=lambda item: item[0].median_us)
        latency = timing.median_us
        if split.packed and untuned_us >= latency:
            split, path, error = _with_drop_in(session, reference, mod, best, target, work_dir)
    if untuned_us < latency:
        log.info("job %s: the plain function (%.2f us) beat every candidate (%.2f us)",
                 job_id, untuned_us, latency)  # fmt: skip
        spread = max(untuned_before.spread, untuned_after.spread)
        plain = work_dir / "untuned.so"
        return Winner(None, untuned_us, spread, untuned_us, untuned_error, mod, [], plain)
    return Winner(
        best, latency, timing.spread, untuned_us, error, split.mod, list(split.packed), path
    )


def _with_drop_in(
    session: Any, reference: Reference, mod: Any, record: Record, target: Any, work_dir: Path
) -> tuple[Any, Path, float]:
    """The packed winner's published library: pack functions, ``main_packed`` and the drop-in
    ``main`` (the user's layouts, packing inside the call), each entry point verified. A
    kernel whose drop-in TVM cannot build (a bf16 micro-kernel: `tuning.search.bf16_dot`) is
    published without it, as it was verified and timed."""
    drop_in = not reads_packed_bf16(record.trace_json)
    split = split_packed(apply_trace(mod, record.trace_json), drop_in=drop_in)
    path = work_dir / f"published-{record.id}.so"
    kernel = session.load(build_library(split.mod, target, path))
    packed = reference.check(kernel, split.packed)
    return split, path, max(reference.check(kernel), packed) if drop_in else packed
