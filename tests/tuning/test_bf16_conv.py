"""bf16 NHWC convolutions on the ``vdpbf16ps`` kernel (`tuning.search.bf16_conv`): offered in the
packed space for the convolutions it fits on a target with a bf16 unit (and only there), its
trace passes the gate and replays, its weight is packed by a function of its own, it compiles
to vdpbf16ps and, where the CPU has the instruction, a job publishes a kernel that equals the
float64 reference of the same bf16 inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm

from tests.tuning.bf16_jobs import operator_spaces, run_packed_job
from tuning.catalog import get_operator
from tuning.hardware.bf16 import DOT_16x2
from tuning.hardware.host import cpu_flags
from tuning.hardware.targets import resolve_target
from tuning.measure.timing import run_module
from tuning.publish.packing import PACKED_ENTRY, PackedParam, split_packed
from tuning.publish.verify import apply_trace
from tuning.traces import trace_to_text

ZEN4 = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}
CONV = {"layout": "NHWC", "N": 1, "C": 32, "H": 9, "W": 9, "K": 32, "R": 3, "S": 3,
        "dtype": "bfloat16"}  # fmt: skip


def _conv_spaces(spaces: list) -> list:
    return [s for s in spaces if DOT_16x2 in trace_to_text(s.trace.as_json())]


def _has_bf16_dot() -> bool:
    return "avx512bf16" in (cpu_flags() or set())


@pytest.mark.parametrize(
    ("operator", "params", "out_shape"),
    [
        ("conv2d", CONV, [1, 7, 7, 32]),
        ("conv2d_bias_relu", {**CONV, "stride": 2, "H": 11, "W": 11}, [1, 5, 5, 32]),
        ("conv2d", {**CONV, "R": 1, "S": 1}, [1, 9, 9, 32]),
        ("conv2d", {**CONV, "N": 2, "dilation": 2}, [2, 5, 5, 32]),
    ],
)
def test_the_packed_space_offers_the_conv_kernel_whose_trace_passes_and_replays(
    operator: str, params: dict, out_shape: list[int]
) -> None:
    mod, spaces = operator_spaces(operator, params, ZEN4)
    (conv,) = _conv_spaces(spaces)
    assert len(spaces) > 1  # the spaces that widen bf16 stay beside it
    scheduled = apply_trace(mod, trace_to_text(conv.trace.as_json()))  # the gate, then replay
    split = split_packed(scheduled, drop_in=False)
    (param,) = split.packed
    r, s = params["R"], params["S"]
    assert (param.index, param.shape) == (1, [r, s, 32, 32])
    assert param.packed_shape == [2, r, s, 16, 16, 2] and split.entry == PACKED_ENTRY
    asm = tvm.compile(split.mod, target=ZEN4).mod.inspect_source("asm").splitlines()
    assert sum("vdpbf16ps" in line for line in asm) >= 2

    if not _has_bf16_dot():
        return  # compiled and checked above; running it needs the instruction
    lib = tvm.compile(split.mod, target=resolve_target("host").canonical).mod
    op = get_operator(operator)
    p = op.Params.model_validate(params)
    inputs, expected = op.make_case(p, mod["main"], np.random.default_rng(3))
    actual = run_module(lib, "llvm", inputs, out_shape, "float32", split.packed)
    np.testing.assert_allclose(actual, expected, *op.tolerance(p))


@pytest.mark.parametrize(
    ("params", "target"),
    [
        ({**CONV, "layout": "NCHW"}, ZEN4),  # channels not the innermost axis
        ({**CONV, "dtype": "float32"}, ZEN4),
        (CONV, {**ZEN4, "mcpu": "skylake-avx512"}),  # no bf16 unit
        ({**CONV, "C": 3}, ZEN4),  # an odd channel count: no pairs (an RGB stem)
        ({**CONV, "K": 24}, ZEN4),  # output channels not whole vectors
        ({**CONV, "groups": 2}, ZEN4),
        ({**CONV, "padding": 1}, ZEN4),  # reads a padded copy (a model pads in a task before)
    ],
)
def test_no_conv_kernel_where_it_cannot_run_or_does_not_fit(params: dict, target: dict) -> None:
    _, spaces = operator_spaces("conv2d", params, target)
    assert spaces and not _conv_spaces(spaces)


def test_a_bf16_conv_job_publishes_the_vdpbf16ps_kernel(tmp_path: Path) -> None:
    """The worker's job end to end (the search seeded with the kernel's register blocks,
    verification in the jail, publication): on a CPU with AVX512-BF16 the convolution kernel
    (about twice the widened kernels' speed) wins and ships with its pack function."""
    params_json = {**CONV, "C": 64, "K": 64, "H": 18, "W": 18}
    if not _has_bf16_dot():
        _, spaces = operator_spaces("conv2d", params_json, resolve_target("host").canonical)
        assert spaces and not _conv_spaces(spaces)
        return
    done = run_packed_job(tmp_path, params_json, 8, operator="conv2d")
    assert "tunehub_dpbf16ps" in done.best.tir and done.best.packed_params
    assert done.module.implements_function(PACKED_ENTRY)
    inputs, expected = done.op.make_case(
        done.params, done.spec.mod["main"], np.random.default_rng(9)
    )
    packed = [PackedParam(**p) for p in done.best.packed_params]
    actual = run_module(done.module, "llvm", inputs, [1, 16, 16, 64], "float32", packed)
    np.testing.assert_allclose(actual, expected, *done.op.tolerance(done.params))
