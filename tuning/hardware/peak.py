"""The fp32 FMA peak of a CPU target, measured on this machine: what a perfect kernel could
reach on its cores at the clock they really run. Workers measure it once at start and report it
with their fingerprint, so that schedules can be shown as a fraction of their target's peak;
`bench/kernel_quality.py` divides its rows by it."""

from __future__ import annotations

from typing import Any

import numpy as np

from tuning.hardware.vectors import vector_bits

# (chains, distinct multiplier rows) tried per vector width; the peak is the best of them.
# Chains that read the same row from the same start are the same computation, and a compiler may
# merge them: on an Emerald Rapids host the old 16 chains over 4 rows ran at 326 GFLOPS where
# 12 distinct chains in C reached 493. Distinct chains need a register for each row too, so
# AVX-512 (32 registers) runs 12 over 12 rows, AVX2 (16 registers) 10 over 10; the shared-row
# variants stay because a compiler that does not merge them runs them best (measured on a
# 2-core Zen 4 VM: AVX2 12 over 6 rows 235 GFLOPS, 8 over 8 203, 16 over 4 spills at 122).
VARIANTS = {16: ((12, 12), (16, 4), (8, 8)), 8: ((10, 10), (12, 6), (12, 4), (8, 8))}


def measured_peak_gflops(target: dict[str, Any], threads: int, lanes: int) -> float:
    """fp32 FMA throughput on ``threads`` threads of TVM's pool, each running independent
    ``lanes``-wide vector FMA chains held in registers (no memory traffic), compiled by TVM for
    ``target``: the best of `VARIANTS` (about a second in all). The caller's TVM pool must have
    ``threads`` threads (`tuning.hardware.threads.pin_runtime_threads`)."""
    return max(
        _chains_gflops(target, threads, lanes, chains, rows)
        for chains, rows in VARIANTS.get(lanes, VARIANTS[8])
    )


def _chains_gflops(target: dict[str, Any], threads: int, lanes: int, acc: int, rows: int) -> float:
    """GFLOPS of ``acc`` chains per thread, acc[a] += x[a % rows] * y, `depth` FMAs each."""
    import tvm
    import tvm.s_tir as s_tir
    from tvm import te

    depth = 1 << 20
    x = te.placeholder((threads, rows, lanes), name="x")
    y = te.placeholder((threads, lanes), name="y")
    k = te.reduce_axis((0, depth), name="k")
    out = te.compute(
        (threads, acc, lanes),
        lambda t, a, v: te.sum(x[t, a % rows, v] * y[t, v], axis=k),
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
        tvm.runtime.tensor(rng.random((threads, rows, lanes), dtype=np.float32), dev),
        tvm.runtime.tensor(rng.random((threads, lanes), dtype=np.float32), dev),
        tvm.runtime.empty((threads, acc, lanes), "float32", dev),
    ]
    secs = min(lib.time_evaluator("main", dev, number=3, repeat=5)(*args).results)
    return float(2 * threads * acc * lanes * depth / secs / 1e9)


def target_peak_gflops(canonical: dict[str, Any]) -> float | None:
    """The measured peak of an llvm target on this machine (on its ``num-cores`` threads, its
    vectors as wide as the packed space tiles them); None for other kinds."""
    import tvm

    if canonical.get("kind") != "llvm":
        return None
    threads = int(canonical.get("num-cores", 1))
    lanes = max(4, vector_bits(tvm.target.Target(canonical)) // 32)
    return measured_peak_gflops(canonical, threads, lanes)
