"""The fp32 FMA peak of a CPU target, measured on this machine: what a perfect kernel could
reach on its cores at the clock they really run. Workers measure it once at start and report it
with their fingerprint, so that schedules can be shown as a fraction of their target's peak;
`bench/kernel_quality.py` divides its rows by it."""

from __future__ import annotations

from typing import Any

import numpy as np


def measured_peak_gflops(target: dict[str, Any], threads: int, lanes: int) -> float:
    """fp32 FMA throughput on ``threads`` threads, each running 16 (AVX2: 8) independent
    ``lanes``-wide vector FMA chains held in registers (no memory traffic), compiled by TVM for
    ``target``. Takes about a second (one compile, fifteen runs of a few ms)."""
    import tvm
    import tvm.s_tir as s_tir
    from tvm import te

    # acc[a] += x[a % 4] * y: `acc` chains and 5 operands in registers, `acc` FMAs per
    # iteration. AVX-512 has 32 vector registers (16 chains); AVX2 has 16, where 16 chains spill
    # (measured on a Zen 4 VM without AVX-512: 91 GFLOPS of a nominal 166) and 8 chains, 2 FMA
    # pipes x 4 cycles of latency, keep both pipes busy.
    acc, depth = (16 if lanes >= 16 else 8), 1 << 20
    x = te.placeholder((threads, 4, lanes), name="x")
    y = te.placeholder((threads, lanes), name="y")
    k = te.reduce_axis((0, depth), name="k")
    out = te.compute(
        (threads, acc, lanes),
        lambda t, a, v: te.sum(x[t, a % 4, v] * y[t, v], axis=k),
        name="chains",
    )
    # enable_check=False: vectorizing a decomposed reduction is what MetaSchedule does too.
    sch = s_tir.Schedule(te.create_prim_func([x, y, out]), enable_check=False)
    block = sch.get_sblock("chains")
    t, a, v, kk = sch.get_loops(block)
    sch.reorder(t, kk, a, v)
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), t)
    sch.decompose_reduction(block, kk)
    sch.unroll(a)
    sch.vectorize(v)
    sch.parallel(t)
    lib = tvm.compile(sch.mod, target=tvm.target.Target(target)).mod
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    args = [
        tvm.runtime.tensor(rng.random((threads, 4, lanes), dtype=np.float32), dev),
        tvm.runtime.tensor(rng.random((threads, lanes), dtype=np.float32), dev),
        tvm.runtime.empty((threads, acc, lanes), "float32", dev),
    ]
    secs = min(lib.time_evaluator("main", dev, number=3, repeat=5)(*args).results)
    return float(2 * threads * acc * lanes * depth / secs / 1e9)


def target_peak_gflops(canonical: dict[str, Any]) -> float | None:
    """The measured peak of an llvm target on this machine (on its ``num-cores`` threads, its
    vectors as wide as the packed space tiles them); None for other kinds."""
    import tvm

    from tuning.search.spaces import vector_bits

    if canonical.get("kind") != "llvm":
        return None
    threads = int(canonical.get("num-cores", 1))
    lanes = max(4, vector_bits(tvm.target.Target(canonical)) // 32)
    return measured_peak_gflops(canonical, threads, lanes)
