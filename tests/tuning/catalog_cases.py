"""Tiny parameter sets covering every catalog operator and layout (shared by the tests)."""

from __future__ import annotations

_CONV = {"N": 1, "C": 4, "H": 9, "W": 8, "K": 6, "R": 3, "S": 3}

CASES: list[tuple[str, dict]] = [
    ("add", {"shape": [2, 3, 4, 5], "rhs_shape": [3, 1, 1]}),
    ("add", {"shape": [4, 8]}),
    ("mul", {"shape": [4, 8], "rhs_shape": [8]}),
    ("exp", {"shape": [4, 16]}),
    ("log", {"shape": [4, 16]}),
    ("relu", {"shape": [2, 3, 8]}),
    ("sigmoid", {"shape": [4, 16]}),
    ("scale_shift", {"N": 1, "C": 3, "H": 4, "W": 5}),
    ("matmul", {"M": 8, "N": 12, "K": 16}),
    ("batch_matmul", {"B": 2, "M": 4, "N": 5, "K": 3}),
    ("dense", {"M": 3, "N": 5, "K": 4}),
    ("dense", {"M": 3, "N": 5, "K": 4, "bias": True}),
    ("conv2d", {**_CONV, "layout": "NCHW", "stride": 2, "padding": 1}),
    ("conv2d", {**_CONV, "layout": "NHWC", "padding": 2, "dilation": 2}),
    ("conv2d", {**_CONV, "layout": "NCHW", "groups": 2, "padding": 1}),
    ("conv2d", {**_CONV, "layout": "NHWC", "groups": 2}),
    ("conv2d", {**_CONV, "R": 1, "S": 1}),
    ("conv2d_bias_relu", {**_CONV, "layout": "NCHW", "padding": 1}),
    ("conv2d_bias_relu", {**_CONV, "layout": "NHWC", "stride": 2}),
    ("conv2d_bn_relu", {**_CONV, "layout": "NCHW", "padding": 1}),
    ("conv2d_bn_relu", {**_CONV, "layout": "NHWC"}),
    (
        "depthwise_conv2d",
        {
            "layout": "NCHW",
            "N": 1,
            "C": 4,
            "H": 8,
            "W": 8,
            "R": 3,
            "S": 3,
            "multiplier": 2,
            "padding": 1,
        },
    ),
    (
        "depthwise_conv2d",
        {"layout": "NHWC", "N": 1, "C": 4, "H": 8, "W": 8, "R": 3, "S": 3, "stride": 2},
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
            "stride": 2,
            "padding": 1,
            "output_padding": 1,
        },
    ),
    (
        "max_pool2d",
        {
            "layout": "NCHW",
            "N": 1,
            "C": 3,
            "H": 8,
            "W": 7,
            "R": 3,
            "S": 3,
            "stride": 2,
            "padding": 1,
        },
    ),
    ("max_pool2d", {"layout": "NHWC", "N": 1, "C": 3, "H": 8, "W": 7, "R": 2, "S": 2, "stride": 2}),
    (
        "avg_pool2d",
        {"layout": "NCHW", "N": 1, "C": 3, "H": 8, "W": 7, "R": 3, "S": 3, "padding": 1},
    ),
    ("avg_pool2d", {"layout": "NHWC", "N": 1, "C": 3, "H": 8, "W": 7, "R": 2, "S": 2, "stride": 2}),
    ("global_pool", {"layout": "NCHW", "pool": "avg", "N": 1, "C": 5, "H": 4, "W": 3}),
    ("global_pool", {"layout": "NHWC", "pool": "max", "N": 1, "C": 5, "H": 4, "W": 3}),
    ("batch_norm", {"N": 1, "C": 3, "H": 4, "W": 5}),
    ("layer_norm", {"rows": 4, "cols": 32}),
    ("softmax", {"rows": 4, "cols": 32}),
]

_F16 = {"dtype": "float16"}
_I8 = {"dtype": "int8"}
# float16 (fp32 arithmetic, one rounding) and int8 (int32 arithmetic) variants.
CASES += [
    ("add", {"shape": [2, 3, 4, 5], "rhs_shape": [3, 1, 1], **_F16}),
    ("exp", {"shape": [4, 16], **_F16}),
    ("sigmoid", {"shape": [4, 16], **_F16}),
    ("scale_shift", {"N": 1, "C": 3, "H": 4, "W": 5, **_F16}),
    ("matmul", {"M": 8, "N": 12, "K": 16, **_F16}),
    ("matmul", {"M": 8, "N": 12, "K": 16, **_I8}),
    ("batch_matmul", {"B": 2, "M": 4, "N": 5, "K": 3, **_I8}),
    ("dense", {"M": 3, "N": 5, "K": 4, "bias": True, **_F16}),
    ("dense", {"M": 3, "N": 5, "K": 4, "bias": True, **_I8}),
    ("conv2d", {**_CONV, "layout": "NCHW", "stride": 2, "padding": 1, **_I8}),
    ("conv2d", {**_CONV, "layout": "NHWC", "padding": 1, **_F16}),
    ("conv2d_bias_relu", {**_CONV, "layout": "NHWC", "padding": 1, **_I8}),
    ("conv2d_bn_relu", {**_CONV, "layout": "NCHW", "padding": 1, **_F16}),
    (
        "depthwise_conv2d",
        {"layout": "NHWC", "N": 1, "C": 4, "H": 8, "W": 8, "R": 3, "S": 3, "padding": 1, **_I8},
    ),
    (
        "conv2d_transpose",
        {"N": 1, "C": 4, "H": 5, "W": 6, "K": 3, "R": 3, "S": 3, "stride": 2, **_F16},
    ),
    ("max_pool2d", {"layout": "NHWC", "N": 1, "C": 3, "H": 8, "W": 7, "R": 3, "S": 3, **_I8}),
    ("avg_pool2d", {"layout": "NCHW", "N": 1, "C": 3, "H": 8, "W": 7, "R": 3, "S": 3, **_F16}),
    ("global_pool", {"layout": "NHWC", "pool": "avg", "N": 1, "C": 5, "H": 4, "W": 3, **_F16}),
    ("batch_norm", {"N": 1, "C": 3, "H": 4, "W": 5, **_F16}),
    ("layer_norm", {"rows": 4, "cols": 32, **_F16}),
    ("softmax", {"rows": 4, "cols": 32, **_F16}),
]
_BF16 = {"dtype": "bfloat16"}
_WINDOW = {"N": 1, "H": 6, "W": 5, "R": 3, "S": 3}
# bfloat16 contractions (fp32 products and sums, fp32 result).
CASES += [
    ("matmul", {"M": 8, "N": 32, "K": 16, **_BF16}),
    ("batch_matmul", {"B": 2, "M": 4, "N": 16, "K": 6, **_BF16}),
    ("dense", {"M": 3, "N": 16, "K": 8, "bias": True, **_BF16}),
    ("conv2d", {"layout": "NHWC", **_WINDOW, "C": 4, "K": 16, "padding": 1, **_BF16}),
    ("conv2d_bias_relu", {"layout": "NCHW", **_WINDOW, "C": 3, "K": 4, "stride": 2, **_BF16}),
]


def case_id(case: tuple[str, dict]) -> str:
    """A readable test id: operator plus its layout or distinguishing options."""
    name, params = case
    extras = [str(params[k]) for k in ("layout", "pool") if k in params]
    if params.get("groups", 1) != 1:
        extras.append(f"groups{params['groups']}")
    if params.get("bias") is True:
        extras.append("bias")
    if params.get("R", 3) != 3:
        extras.append(f"R{params['R']}")
    if "rhs_shape" in params:
        extras.append("bcast")
    if params.get("dtype", "float32") != "float32":
        extras.append(params["dtype"])
    return "-".join([name, *extras])
