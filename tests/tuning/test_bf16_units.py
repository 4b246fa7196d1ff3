"""The bf16 units of a target and the kernels that measure their peak: which unit a target
declares, that the kernels compile to the unit's instructions, and that the vdpbf16ps kernel
computes bf16 dot products with fp32 accumulation (on a host that has the instruction)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tvm

from service.dashboard.formatting import peak_for, share_of_peak
from tuning.hardware.bf16 import AMX, AVX512_BF16, bf16_unit, has_bf16_dot
from tuning.hardware.host import cpu_flags, host_target_spec
from tuning.hardware.peak_bf16 import CHAINS, amx_tiles, dpbf16_chains
from tuning.hardware.roofline import roofline_us


@pytest.mark.parametrize(
    ("spec", "unit"),
    [
        ({"kind": "llvm", "mcpu": "sapphirerapids"}, AMX),
        ({"kind": "llvm", "mcpu": "znver4"}, AVX512_BF16),
        ({"kind": "llvm", "mcpu": "cooperlake"}, AVX512_BF16),
        # The host target of a CPU that lists AMX but whose OS refuses the tile state.
        ({"kind": "llvm", "mcpu": "sapphirerapids", "mattr": ["-amx-tile"]}, AVX512_BF16),
        ({"kind": "llvm", "mcpu": "rocketlake"}, None),
        ({"kind": "llvm", "mcpu": "znver4", "mattr": ["-avx512f"]}, None),
        ({"kind": "cuda", "arch": "sm_80"}, None),
    ],
)
def test_unit_a_target_declares(spec: dict, unit: str | None) -> None:
    assert bf16_unit(tvm.target.Target(spec)) == unit


def _asm(func: object, spec: dict) -> list[str]:
    lib = tvm.compile(tvm.IRModule({"main": func}), target=spec).mod
    return lib.inspect_source("asm").splitlines()


def test_the_peak_kernels_are_the_units_instructions() -> None:
    """Compiled anywhere (no bf16 hardware needed): the chains are vdpbf16ps on zmm registers,
    inlined (no call), the tile loop configures its tiles and runs tdpbf16ps."""
    chains = _asm(dpbf16_chains(2), {"kind": "llvm", "mcpu": "znver4"})
    assert sum("vdpbf16ps" in line and "zmm" in line for line in chains) >= CHAINS
    assert not any("call" in line and "tunehub_dpbf16ps" in line for line in chains)
    tiles = _asm(amx_tiles(2), {"kind": "llvm", "mcpu": "sapphirerapids"})
    assert any("ldtilecfg" in line for line in tiles)
    assert sum("tdpbf16ps" in line for line in tiles) >= 4
    assert any("tilerelease" in line for line in tiles)


def test_the_dot_product_kernel_computes_bf16_products_in_fp32() -> None:
    """Where the CPU has no AVX512-BF16, the host target must not claim it (nothing to run)."""
    flags = cpu_flags() or set()
    if "avx512bf16" not in flags:
        assert not has_bf16_dot(tvm.target.Target(host_target_spec()))
        return
    # Built for this CPU (a Zen 4 target could use instructions a Cooper Lake lacks).
    lib = tvm.compile(tvm.IRModule({"main": dpbf16_chains(1)}), target=host_target_spec()).mod
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, size=(1, CHAINS, 32)).astype(np.float32)
    y = rng.uniform(-2, 2, size=(1, 32)).astype(np.float32)
    as_bf16 = [(v.view(np.uint32) >> 16).astype(np.uint16) for v in (x, y)]  # truncated
    xb, yb = ((b.astype(np.uint32) << 16).view(np.float32) for b in as_bf16)
    out = tvm.runtime.empty((1, CHAINS, 16), "float32")
    lib["main"](out, tvm.runtime.tensor(as_bf16[0]), tvm.runtime.tensor(as_bf16[1]), 3)
    pairs = (xb[0] * yb[0]).astype(np.float64).reshape(CHAINS, 16, 2).sum(axis=-1)
    np.testing.assert_allclose(out.numpy()[0], 3 * pairs, rtol=1e-5, atol=1e-5)


def _target(**figures: object) -> SimpleNamespace:
    base = dict(peak_gflops=230.0, peak_trusted=True, bf16_peak_gflops=None,
                bf16_peak_trusted=False, bandwidth_trusted=False, cache_gbps=None,
                memory_gbps=None, cache_bytes=None, llc_gbps=None, llc_bytes=None)  # fmt: skip
    return SimpleNamespace(**{**base, **figures})


def test_a_bf16_workloads_roofline_is_its_units_peak_never_the_fp32_one() -> None:
    """A bf16 kernel passes the fp32 peak: a roofline from it would stop its search at 43% of
    what the unit does (the review of issue 39's first cut)."""
    flop = 2 * 128 * 768 * 768
    fp32 = roofline_us(flop, None, _target())
    assert fp32 == pytest.approx(flop / 230e3)
    assert roofline_us(flop, None, _target(), bf16=True) is None  # no bf16 peak measured
    loaded = _target(bf16_peak_gflops=460.0)
    assert roofline_us(flop, None, loaded, bf16=True) is None  # measured under load
    quiet = _target(bf16_peak_gflops=460.0, bf16_peak_trusted=True)
    assert roofline_us(flop, None, quiet, bf16=True) == pytest.approx(flop / 460e3)


def test_the_dashboard_shows_a_bf16_kernel_against_its_units_peak() -> None:
    unit = {"unit": "avx512_bf16", "gflops": 460.0, "interference": 0.0}
    target = {"peak_gflops": 230.0, "peak_interference": 0.0, "bf16_peak": unit}
    bf16 = peak_for(target, {"M": 8, "dtype": "bfloat16"})
    assert (bf16["gflops"], bf16["what"]) == (460.0, "bf16, avx512_bf16")
    assert share_of_peak(230.0, bf16["gflops"], bf16["interference"]) == 50.0
    assert peak_for(target, {"M": 8})["gflops"] == 230.0
    assert peak_for({**target, "bf16_peak": None}, {"dtype": "bfloat16"})["gflops"] is None
