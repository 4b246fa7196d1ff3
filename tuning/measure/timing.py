"""Running and timing a loaded module: its output on given inputs (`run_module`), its median
latency over timed runs (`time_module`), and the quietest of a few timings (`quiet_timing`).
The module is loaded where it may run: the jailed kernel runner or an RPC device
(`tuning.measure.devices`), or this process for the modules it trusts (tests, benchmarks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuning.catalog.dtypes import random_operand
from tuning.hardware.targets import device_for
from tuning.publish.packing import PACKED_ENTRY, PackedParam

NOISY_SPREAD = 0.10  # runs further apart than this (of their median) were disturbed
QUIET_ATTEMPTS = 3  # timings of a kernel at most, to find a quiet one


@dataclass(frozen=True)
class Timing:
    """Median latency of ``repeat`` timed runs."""

    median_us: float
    runs_us: list[float]

    @property
    def spread(self) -> float:
        """How far apart the runs are, as a fraction of their median: (slowest - fastest) /
        median. Another process taking the cores shows here (a kernel alone repeats within a
        few percent)."""
        return (max(self.runs_us) - min(self.runs_us)) / self.median_us if self.runs_us else 0.0


def quiet_timing(measure: Callable[[], Timing]) -> Timing:
    """The quietest of up to `QUIET_ATTEMPTS` timings from ``measure``: timed again while its
    runs spread more than `NOISY_SPREAD` (something else held the cores), the one of lowest
    median kept. Its ``spread`` says how sure the figure is."""
    timings = [measure()]
    while timings[-1].spread > NOISY_SPREAD and len(timings) < QUIET_ATTEMPTS:
        timings.append(measure())
    return min(timings, key=lambda timing: timing.median_us)


def _device(kind_or_device: Any) -> Any:
    return device_for(kind_or_device) if isinstance(kind_or_device, str) else kind_or_device


def run_module(
    module: Any,
    kind: Any,
    inputs: list[np.ndarray],
    out_shape: list[int],
    out_dtype: str,
    packed: Sequence[PackedParam] = (),
) -> np.ndarray:
    """Call the module on ``inputs`` (in the user's layouts) and return the output. ``kind``: a
    target kind (a local device) or a TVM device (a remote one). With ``packed`` parameters, the
    weights go through their ``pack_<i>`` functions first and ``main_packed`` runs: the packed
    layout is undone by the module itself, so the output compares with the reference as is."""
    import tvm

    dev = _device(kind)
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    for param in packed:
        packed_arg = tvm.runtime.empty(param.packed_shape, param.dtype, dev)
        module[param.function](args[param.index], packed_arg)
        args[param.index] = packed_arg
    out = tvm.runtime.empty(out_shape, out_dtype, dev)
    module[PACKED_ENTRY if packed else "main"](*args, out)
    return out.numpy()


def time_module(
    module: Any,
    kind: Any,
    specs: list[tuple[list[int], str]],
    repeat: int = 5,
    min_repeat_ms: int = 100,
    entry: str = "main",
) -> Timing:
    """Time ``entry`` with `time_evaluator` (each run lasts at least ``min_repeat_ms``); ``kind``
    as in `run_module`; ``specs``: the entry's (shape, dtype) arguments."""
    import tvm

    dev = _device(kind)
    # Random data, never uninitialised memory: stray NaNs and denormals in an empty buffer slow
    # floating-point kernels down by up to 100x (measured: 46 ms instead of 1.3 ms on a 512^3
    # matmul), at random, which would rank candidates by the luck of the allocator.
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(random_operand(shape, dtype, rng), dev) for shape, dtype in specs]
    timer = module.time_evaluator(entry, dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    runs = [float(x) * 1e6 for x in timer(*args).results]
    return Timing(median_us=float(np.median(runs)), runs_us=runs)
