"""Pointwise convolutions: the micro-kernel's seeds against the other spaces' register-tile seeds.

A stride-1 1x1 NCHW convolution is ``W[K, C] @ X[C, H*W]``; the packed space rewrites it into that
matmul and gives it the micro-kernel (`tuning.search.pointwise_conv`). This prints, per case,
the best of the micro-kernel's seeds (`micro_kernel_seeds`) and the best of the register-tile
seeds of the packed space's other design spaces (`register_tile_seeds`: the channel-vector and
multi-level tilings): no search, each seed compiled with its weight packed beforehand (the
kernel a deployment calls) and timed in this process with TVM's evaluator (50 runs, best of 5),
on ``BENCH_THREADS`` threads (default: the cores). The cases are MobileNet-V2's layers, with
bias and ReLU as the catalog's ``conv2d_bias_relu``.

    .venv/bin/python bench/pointwise_seeds.py [--cases 24x144@56 144x24@56 16x96@112]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def packed_context(channels: int, filters: int, size: int) -> tuple[Any, Any, Any]:
    """The catalog workload ``conv2d_bias_relu`` 1x1 ``channels -> filters`` at ``size``², in
    the packed space on this host: (module, target, initialised TuneContext)."""
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext

    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.targets import resolve_target
    from tuning.search.spaces import PACKED, space_generator, space_module

    op = get_operator("conv2d_bias_relu")
    assert op is not None
    params = {"layout": "NCHW", "N": 1, "C": channels, "H": size, "W": size, "K": filters}
    spec = catalog_workload("conv2d_bias_relu", op.Params(**params, R=1, S=1))
    target = tvm.target.Target(resolve_target("host").canonical)
    mod = space_module(spec.mod, PACKED, op.constant_operands)
    context = TuneContext(
        mod=mod, target=target, space_generator=space_generator(PACKED, target, mod)
    ).clone()
    return mod, target, context


def best_us(mod: Any, target: Any, seeds: list[Any]) -> float:
    """The fastest of ``seeds`` (traces of ``mod``), in microseconds, weights packed once."""
    import tvm
    from tvm.s_tir.schedule import Schedule

    from tuning.publish.packing import split_packed

    device = tvm.cpu()
    rng = np.random.default_rng(0)
    best = float("inf")
    for trace in seeds:
        sch = Schedule(mod)
        trace.apply_to_schedule(sch, remove_postproc=False)
        split = split_packed(sch.mod)
        entry = "main_packed" if split.packed else "main"
        library = tvm.compile(split.mod, target=target)
        args = [
            tvm.runtime.tensor(rng.random([int(x) for x in p.shape], dtype="float32"), device)
            for p in split.mod[entry].params
        ]
        timer = library.mod.time_evaluator(entry, device, number=50, repeat=5)
        best = min(best, min(timer(*args).results) * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["24x144@56", "144x24@56", "16x96@112"])
    args = parser.parse_args()
    from tuning.hardware.threads import pin_runtime_threads
    from tuning.search.tile_seeds import micro_kernel_seeds, register_tile_seeds

    threads = pin_runtime_threads(int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1)))
    print(f"TVM on {threads} threads")
    print(f"{'case':>12} {'micro-kernel us':>16} {'register-tile us':>17} {'ratio':>6}")
    for case in args.cases:
        shape, size = case.split("@")
        channels, filters = (int(x) for x in shape.split("x"))
        mod, target, context = packed_context(channels, filters, int(size))
        micro = best_us(mod, target, micro_kernel_seeds(context))
        tiles = best_us(mod, target, register_tile_seeds(context, threads))
        gflops = 2 * channels * filters * int(size) ** 2 / 1e3
        print(
            f"{case:>12} {micro:>9.1f} ({gflops / micro:3.0f} GF) "
            f"{tiles:>9.1f} ({gflops / tiles:3.0f} GF) {tiles / micro:5.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
