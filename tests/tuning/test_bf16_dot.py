"""The AVX512-BF16 micro-kernel: a bf16 matmul tensorized on vdpbf16ps, its weight packed by a
function of its own (as an artifact ships it), equal to a float64 product of the same bf16
inputs to fp32 rounding (run where the CPU has the instruction; compiled everywhere)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tvm

from tuning.hardware.host import cpu_flags
from tuning.publish.packing import PACKED_ENTRY, split_packed
from tuning.search.bf16_dot import bf16_matmul, bf16_micro_kernel

ZEN4 = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}


def _scheduled(m: int, n: int, k: int, rows: int, vectors: int, kc: int) -> object:
    sch = tvm.s_tir.Schedule(bf16_matmul(m, n, k))
    bf16_micro_kernel(sch, rows, vectors, kc)
    # No drop-in ``main``: there B's copy is a buffer of the kernel's own, which TVM's bf16
    # legalisation widens to fp32, and the intrinsic reads bf16 bits.
    return split_packed(sch.mod, drop_in=False)


def test_the_kernel_is_vdpbf16ps_with_its_weight_packed_once() -> None:
    split = _scheduled(8, 64, 64, rows=4, vectors=2, kc=32)
    (param,) = split.packed
    assert (param.index, param.shape, param.packed_shape) == (1, [64, 64], [4, 32, 16, 2])
    lib = tvm.compile(split.mod, target=ZEN4).mod
    asm = lib.inspect_source("asm").splitlines()
    assert sum("vdpbf16ps" in line for line in asm) >= 4
    assert not any("call" in line and "tunehub_dpbf16ps" in line for line in asm)


def test_the_kernel_computes_the_bf16_product_in_fp32() -> None:
    if "avx512bf16" not in (cpu_flags() or set()):
        pytest.skip("this CPU has no AVX512-BF16 (vdpbf16ps) to run the kernel on")
    m, n, k = 8, 48, 96
    split = _scheduled(m, n, k, rows=2, vectors=3, kc=32)
    lib = tvm.compile(split.mod, target=ZEN4).mod
    rng = np.random.default_rng(7)
    a = rng.uniform(-4, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-4, 4, (k, n)).astype(ml_dtypes.bfloat16)
    (param,) = split.packed
    packed = tvm.runtime.empty(param.packed_shape, "bfloat16")
    lib[param.function](tvm.runtime.tensor(b), packed)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    out = tvm.runtime.empty((m, n), "float32")
    lib[PACKED_ENTRY](tvm.runtime.tensor(a), packed, out)
    # Each product of two bf16 is exact in fp32; 96 fp32 sums round at most ~1e-6 of the scale.
    np.testing.assert_allclose(out.numpy(), expected, rtol=0, atol=2e-6 * np.abs(expected).max())


def test_shapes_the_kernel_cannot_take_are_refused() -> None:
    with pytest.raises(ValueError, match="n % 16"):
        bf16_matmul(8, 40, 64)
    with pytest.raises(ValueError, match="k % 2"):
        bf16_matmul(8, 32, 63)
