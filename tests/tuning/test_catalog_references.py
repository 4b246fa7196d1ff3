"""Every catalog operator: its TE definition, compiled unscheduled, matches its numpy reference
(so the references that guard tuned kernels are themselves right), and its schema holds."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from tests.tuning.catalog_cases import CASES, case_id
from tuning.catalog import get_operator, list_operators
from tuning.catalog.workload import catalog_workload
from tuning.hardware.targets import resolve_target
from tuning.ir import arg_specs
from tuning.measure.timing import run_module
from tuning.publish.verify import check_close, compile_to_library

SEED_FLOOR = {
    "add",
    "mul",
    "matmul",
    "batch_matmul",
    "exp",
    "log",
    "conv2d",
    "conv2d_transpose",
    "depthwise_conv2d",
    "max_pool2d",
    "avg_pool2d",
    "global_pool",
    "batch_norm",
    "relu",
    "sigmoid",
    "softmax",
    "layer_norm",
    "conv2d_bn_relu",
    "conv2d_bias_relu",
    "dense",
    "scale_shift",
}


def test_catalog_covers_the_seed_operator_list() -> None:
    names = {op.name for op in list_operators()}
    assert names >= SEED_FLOOR
    assert {name for name, _ in CASES} == names  # every operator has a test case


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_unscheduled_kernel_matches_reference(case: tuple[str, dict], tmp_path) -> None:
    name, raw = case
    op = get_operator(name)
    params = op.Params.model_validate(raw)
    spec = catalog_workload(name, params)
    func = spec.mod["main"]
    module = compile_to_library(spec.mod, resolve_target("host").tvm(), tmp_path / "k.so")
    inputs, expected = op.make_case(params, func, np.random.default_rng(0))
    out_shape, out_dtype = arg_specs(func)[-1]
    assert list(expected.shape) == out_shape
    actual = run_module(module, "llvm", inputs, out_shape, out_dtype)
    rtol, atol = op.tolerance(params)
    check_close(actual, expected, rtol, atol)
    assert op.flop(params) > 0


@pytest.mark.parametrize(
    "name, raw, loc",
    [
        ("conv2d", {"N": 1, "C": 4, "H": 8, "W": 8, "K": 6, "R": 3, "S": 3, "groups": 4}, ()),
        ("conv2d", {"N": 1, "C": 4, "H": 2, "W": 2, "K": 6, "R": 5, "S": 5}, ()),
        (
            "conv2d",
            {"N": 1, "C": 4, "H": 8, "W": 8, "K": 6, "R": 3, "S": 3, "stride": 0},
            ("stride",),
        ),
        (
            "conv2d",
            {"N": 1, "C": 4, "H": 8, "W": 8, "K": 6, "R": 3, "S": 3, "layout": "HWCN"},
            ("layout",),
        ),
        (
            "conv2d_transpose",
            {
                "N": 1,
                "C": 4,
                "H": 5,
                "W": 6,
                "K": 3,
                "R": 3,
                "S": 3,
                "stride": 1,
                "output_padding": 1,
            },
            (),
        ),
        ("max_pool2d", {"N": 1, "C": 3, "H": 8, "W": 7, "R": 2, "S": 2, "padding": 2}, ()),
        ("add", {"shape": [2, 3], "rhs_shape": [4]}, ()),
        ("add", {"shape": [2, 3, 4, 5, 6]}, ("shape",)),
        ("softmax", {"rows": 0, "cols": 3}, ("rows",)),
        ("layer_norm", {"rows": 2, "cols": 3, "epsilon": 0}, ("epsilon",)),
        ("global_pool", {"N": 1, "C": 5, "H": 4, "W": 3, "pool": "median"}, ("pool",)),
        # int8 products summed over C*R*S = 4096*49 terms could overflow int32.
        (
            "conv2d",
            {"N": 1, "C": 4096, "H": 7, "W": 7, "K": 1, "R": 7, "S": 7, "dtype": "int8"},
            (),
        ),
    ],
)
def test_inconsistent_params_are_rejected(name: str, raw: dict, loc: tuple) -> None:
    with pytest.raises(ValidationError) as info:
        get_operator(name).Params.model_validate(raw)
    assert any(tuple(e["loc"]) == loc for e in info.value.errors()), info.value.errors()
