# TVMScript's buffer annotations are calls, not types: mypy cannot read its kernels.
# mypy: disable-error-code="valid-type,untyped-decorator"
"""The bf16 peak of a CPU target, measured on this machine as `tuning.hardware.peak` measures the
fp32 one: what a perfect bf16 kernel (bf16 products, fp32 accumulation) could reach on its
cores. A bf16 kernel's "% of peak" is against this figure, never against the fp32 peak.

On `AVX512_BF16`: 12 independent ``vdpbf16ps`` chains a thread over 12 distinct rows (each
instruction is 32 bf16 multiply-adds into 16 fp32 lanes). On `AMX`: 4 accumulator tiles a thread
fed by 2 A and 2 B tiles held in the tile registers (each ``tdpbf16ps`` is 16x16x32
multiply-adds), the loop `bench/hardware_figures.py` compares with a C loop of the same
instructions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tuning.hardware.bf16 import AMX, AVX512_BF16, DPBF16PS, DPBF16PS_LL, bf16_unit, request_amx

CHAINS = 12  # as the fp32 peak: 12 distinct chains fill AVX-512's latency x throughput
DEPTH = 1 << 20
TILE_ITERS = 1 << 18
ONE = 0x3F80  # bf16 1.0


def target_bf16_peak(canonical: dict[str, Any]) -> tuple[str, float] | None:
    """(unit, GFLOPS) of an llvm target's fastest bf16 unit on its ``num-cores`` threads; None
    where it declares none, or declares AMX and this process may not use it. The caller's TVM
    pool must have those threads (`tuning.hardware.threads.pin_runtime_threads`)."""
    import tvm

    target = tvm.target.Target(canonical)
    unit = bf16_unit(target)
    threads = int(canonical.get("num-cores", 1))
    if unit == AMX:
        return (AMX, amx_peak_gflops(canonical, threads)) if request_amx() else None
    if unit == AVX512_BF16:
        return AVX512_BF16, dpbf16_peak_gflops(canonical, threads)
    return None


def dpbf16_chains(threads: int) -> Any:
    """The PrimFunc of `CHAINS` ``vdpbf16ps`` chains a thread: out[t, c, :] = sum over the
    iterations of x[t, c, :] . y[t, :] (pairs of bf16, stored as uint16, into 16 fp32 lanes)."""
    from tvm.script import tirx as T

    @T.prim_func
    def chains(
        out: T.Buffer((threads, CHAINS, 16), "float32"),
        x: T.Buffer((threads, CHAINS, 32), "uint16"),
        y: T.Buffer((threads, 32), "uint16"),
        iters: T.int32,
    ) -> None:
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for t in T.parallel(threads):
            with T.attr(0, "pragma_import_llvm", DPBF16PS_LL):
                acc = T.alloc_buffer((CHAINS, 16), "float32", scope="local")
                for c in T.unroll(CHAINS):
                    acc[c, T.ramp(0, 1, 16)] = T.Broadcast(T.float32(0), 16)
                for _k in range(iters):
                    for c in T.unroll(CHAINS):
                        acc[c, T.ramp(0, 1, 16)] = T.call_pure_extern(
                            "float32x16",
                            DPBF16PS,
                            acc[c, T.ramp(0, 1, 16)],
                            x[t, c, T.ramp(0, 1, 32)],
                            y[t, T.ramp(0, 1, 32)],
                        )
                for c in T.unroll(CHAINS):
                    out[t, c, T.ramp(0, 1, 16)] = acc[c, T.ramp(0, 1, 16)]

    return chains


def dpbf16_peak_gflops(canonical: dict[str, Any], threads: int) -> float:
    """GFLOPS of `dpbf16_chains` on ``threads`` threads (best of 5 runs of 3)."""
    rng = np.random.default_rng(0)
    # Distinct rows near 1.0 (so no compiler merges chains and no value overflows).
    x = (ONE + rng.integers(0, 64, size=(threads, CHAINS, 32))).astype(np.uint16)
    y = np.full((threads, 32), 0x3A80, np.uint16)  # ~1e-3
    out = (threads, CHAINS, 16)
    secs = _fastest(dpbf16_chains(threads), canonical, out, [x, y], DEPTH)
    return float(2 * 32 * threads * CHAINS * DEPTH / secs / 1e9)


def _fastest(func: Any, canonical: dict[str, Any], out: tuple[int, ...], inputs: list[Any],
             iters: int) -> float:  # fmt: skip
    """Seconds of the fastest of 5 runs of 3 of the kernel ``func(out, *inputs, iters)``."""
    import tvm

    lib = tvm.compile(tvm.IRModule({"main": func}), target=canonical).mod
    dev = tvm.cpu(0)
    args = [tvm.runtime.empty(out, "float32", dev), *(tvm.runtime.tensor(x, dev) for x in inputs)]
    timer = lib.time_evaluator("main", dev, number=3, repeat=5)
    return float(min(timer(*args, iters).results))


def amx_tiles(threads: int) -> Any:
    """The PrimFunc of the AMX tile loop: per thread, tiles 0-3 accumulate A(4,5) x B(6,7) with
    ``tdpbf16ps`` ``iters`` times and are stored to ``out`` (16x16 fp32 each). The tile shapes
    (16 rows of 64 bytes) are configured by the kernel itself (``ldtilecfg``)."""
    from tvm.script import tirx as T

    @T.prim_func
    def tiles(
        out: T.Buffer((threads, 4, 16, 16), "float32"),
        a: T.Buffer((threads, 16, 32), "uint16"),
        b: T.Buffer((threads, 16, 32), "uint16"),
        iters: T.int32,
    ) -> None:
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for t in T.parallel(threads):
            cfg = T.alloc_buffer((64,), "uint8", scope="local")
            for i in range(64):
                cfg[i] = T.uint8(0)
            cfg[0] = T.uint8(1)  # palette 1
            for r in range(8):
                cfg[16 + 2 * r] = T.uint8(64)  # bytes per row
                cfg[48 + r] = T.uint8(16)  # rows
            T.evaluate(T.call_llvm_intrin("void", "llvm.x86.ldtilecfg", cfg.access_ptr("r")))
            for c in T.unroll(4):
                T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tilezero", T.uint8(c)))
            for n in T.unroll(2):
                T.evaluate(
                    T.call_llvm_intrin(
                        "void",
                        "llvm.x86.tileloadd64",
                        T.uint8(4 + n),
                        a.access_ptr("r", offset=t * 512),
                        T.int64(64),
                    )
                )
                T.evaluate(
                    T.call_llvm_intrin(
                        "void",
                        "llvm.x86.tileloadd64",
                        T.uint8(6 + n),
                        b.access_ptr("r", offset=t * 512),
                        T.int64(64),
                    )
                )
            for _k in range(iters):
                for c in T.unroll(4):
                    T.evaluate(
                        T.call_llvm_intrin(
                            "void",
                            "llvm.x86.tdpbf16ps",
                            T.uint8(c),
                            T.uint8(4 + c // 2),
                            T.uint8(6 + c % 2),
                        )
                    )
            for c in T.unroll(4):
                T.evaluate(
                    T.call_llvm_intrin(
                        "void",
                        "llvm.x86.tilestored64",
                        T.uint8(c),
                        out.access_ptr("w", offset=t * 1024 + c * 256),
                        T.int64(64),
                    )
                )
            T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tilerelease"))

    return tiles


def amx_peak_gflops(canonical: dict[str, Any], threads: int) -> float:
    """GFLOPS of `amx_tiles` on ``threads`` threads (best of 5 runs of 3). Only where
    `request_amx` granted the tile state."""
    ones = np.full((threads, 16, 32), ONE, np.uint16)
    secs = _fastest(amx_tiles(threads), canonical, (threads, 4, 16, 16), [ones, ones], TILE_ITERS)
    return float(2 * 16 * 16 * 32 * 4 * threads * TILE_ITERS / secs / 1e9)
