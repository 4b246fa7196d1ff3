"""Convolutions: conv2d (NCHW/NHWC, stride, padding, dilation, groups; 1×1 is R=S=1), depthwise
conv2d (NCHW/NHWC), conv2d_transpose (NCHW), and the fused conv2d+bias+relu and
conv2d+batchnorm+relu (BN folded into the weights and bias, as deployment does)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from tuning.catalog.base import Dim, Operator, OpParams
from tuning.catalog.dtypes import (
    Contractions,
    Floats,
    FloatsAndInt8,
    compute_dtype,
    contraction_result,
    store_as,
    summed_tolerance,
)

MAX_MACS = 2**36
Kernel = Annotated[int, Field(strict=True, ge=1, le=15)]
Stride = Annotated[int, Field(strict=True, ge=1, le=8)]
Pad = Annotated[int, Field(strict=True, ge=0, le=16)]
Dilation = Annotated[int, Field(strict=True, ge=1, le=8)]
Channels = Annotated[int, Field(strict=True, ge=1, le=4096)]
Spatial = Annotated[int, Field(strict=True, ge=1, le=1024)]
BN_EPS = 1e-5
INT8_MAX_REDUCTION = 2**31 // (128 * 128)  # int32 accumulators of int8 products cannot overflow


# -- numpy references (float64, NCHW data, OIHW weights) ------------------------------------------
def conv2d_nchw_ref(
    x: np.ndarray, w: np.ndarray, stride: int, pad: int, dilation: int, groups: int
) -> np.ndarray:
    """Grouped 2-D convolution; w is [K, C/groups, R, S]."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    oh = (h + 2 * pad - dilation * (r - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dilation * (s - 1) - 1) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, k, oh, ow))
    kg = k // groups
    for g in range(groups):
        xs = xp[:, g * cg : (g + 1) * cg]
        ws = w[g * kg : (g + 1) * kg]
        for i in range(r):
            for j in range(s):
                patch = xs[
                    :,
                    :,
                    i * dilation : i * dilation + stride * (oh - 1) + 1 : stride,
                    j * dilation : j * dilation + stride * (ow - 1) + 1 : stride,
                ]
                out[:, g * kg : (g + 1) * kg] += np.einsum("nchw,kc->nkhw", patch, ws[:, :, i, j])
    return out


def conv2d_transpose_nchw_ref(
    x: np.ndarray, w: np.ndarray, stride: int, pad: int, output_padding: int
) -> np.ndarray:
    """Transposed convolution (the gradient of conv2d); w is [C, K, R, S]."""
    n, c, h, wd = x.shape
    _, k, r, s = w.shape
    full = np.zeros(
        (n, k, (h - 1) * stride + r + output_padding, (wd - 1) * stride + s + output_padding)
    )
    for i in range(r):
        for j in range(s):
            full[
                :, :, i : i + stride * (h - 1) + 1 : stride, j : j + stride * (wd - 1) + 1 : stride
            ] += np.einsum("nchw,ck->nkhw", x, w[:, :, i, j])
    oh = (h - 1) * stride - 2 * pad + r + output_padding
    ow = (wd - 1) * stride - 2 * pad + s + output_padding
    return full[:, :, pad : pad + oh, pad : pad + ow]


def _out(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


class WindowParams(OpParams):
    """An N×C×H×W input (or N×H×W×C) and an R×S window moved with a stride over padding:
    what convolutions and pooling share."""

    layout: Literal["NCHW", "NHWC"] = "NCHW"
    N: Dim
    C: Channels
    H: Spatial
    W: Spatial
    R: Kernel
    S: Kernel
    stride: Stride = 1
    padding: Pad = 0
    dtype: Contractions = "float32"  # bfloat16 for conv2d only: the others narrow it


# -- conv2d and its fusions ---------------------------------------------------------------
class Conv2dParams(WindowParams):
    """Input N×C×H×W (or N×H×W×C), K output channels, an R×S kernel (OIHW, or HWIO for NHWC)."""

    K: Channels
    dilation: Dilation = 1
    groups: Annotated[int, Field(strict=True, ge=1, le=4096)] = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        """Output height and width."""
        return (
            _out(self.H, self.R, self.stride, self.padding, self.dilation),
            _out(self.W, self.S, self.stride, self.padding, self.dilation),
        )

    @model_validator(mode="after")
    def _consistent(self) -> Conv2dParams:
        if self.C % self.groups or self.K % self.groups:
            raise ValueError(f"C={self.C} and K={self.K} must be divisible by groups={self.groups}")
        oh, ow = self.out_hw
        if oh < 1 or ow < 1:
            raise ValueError("the kernel (with dilation) is larger than the padded input")
        reduction = (self.C // self.groups) * self.R * self.S
        macs = self.N * self.K * oh * ow * reduction
        if macs > MAX_MACS:
            raise ValueError(f"{macs} multiply-adds exceed the limit {MAX_MACS}")
        if self.dtype == "int8" and reduction > INT8_MAX_REDUCTION:
            raise ValueError(
                f"int8: C/groups*R*S = {reduction} could overflow the int32 accumulator "
                f"(limit {INT8_MAX_REDUCTION})"
            )
        return self


class FloatConv2dParams(Conv2dParams):
    """conv2d parameters for operators defined on floating-point data only."""

    dtype: Floats = "float32"


class Conv2d(Operator[Conv2dParams]):
    """2-D convolution; groups > 1 is a group convolution, R = S = 1 a 1×1 convolution."""

    name = "conv2d"
    description = (
        "2-D convolution, NCHW (OIHW weights) or NHWC (HWIO); stride, padding, "
        "dilation, groups (group conv); R=S=1 is the 1x1 conv"
    )
    Params: type[Conv2dParams] = Conv2dParams  # a subclass may narrow it
    constant_operands = (1,)  # the kernel W (its subclasses' bias stays as it is)
    example = {
        "layout": "NCHW",
        "N": 1,
        "C": 64,
        "H": 56,
        "W": 56,
        "K": 64,
        "R": 3,
        "S": 3,
        "padding": 1,
    }

    def conv(self, p: Conv2dParams) -> tuple[list[Any], Any]:
        """The TE placeholders (data, weight) and the convolution's output."""
        from tvm import te, topi

        cg = p.C // p.groups
        acc = compute_dtype(p.dtype)  # TOPI accumulates in out_dtype
        if p.layout == "NCHW":
            x = te.placeholder((p.N, p.C, p.H, p.W), p.dtype, name="X")
            w = te.placeholder((p.K, cg, p.R, p.S), p.dtype, name="W")
            if p.groups == 1:
                y = topi.nn.conv2d_nchw(x, w, p.stride, p.padding, p.dilation, acc)
            else:
                y = topi.nn.group_conv2d_nchw(x, w, p.stride, p.padding, p.dilation, p.groups, acc)
        else:
            x = te.placeholder((p.N, p.H, p.W, p.C), p.dtype, name="X")
            w = te.placeholder((p.R, p.S, cg, p.K), p.dtype, name="W")
            if p.groups == 1:
                y = topi.nn.conv2d_nhwc(x, w, p.stride, p.padding, p.dilation, acc)
            else:
                y = topi.nn.group_conv2d_nhwc(x, w, p.stride, p.padding, p.dilation, p.groups, acc)
        return [x, w], y

    def result_dtype(self, params: Conv2dParams) -> str:
        return contraction_result(params.dtype)

    def build(self, params: Conv2dParams) -> Any:
        from tvm import te

        args, y = self.conv(params)
        return te.create_prim_func([*args, store_as(y, self.result_dtype(params))])

    def conv_ref(self, p: Conv2dParams, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The convolution in float64, in the operator's layout."""
        if p.layout == "NHWC":
            x, w = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
        y = conv2d_nchw_ref(
            x.astype(np.float64), w.astype(np.float64), p.stride, p.padding, p.dilation, p.groups
        )
        return y.transpose(0, 2, 3, 1) if p.layout == "NHWC" else y

    def reference(self, params: Conv2dParams, inputs: list[np.ndarray]) -> np.ndarray:
        return self.conv_ref(params, inputs[0], inputs[1])

    def flop(self, p: Conv2dParams) -> float:
        oh, ow = p.out_hw
        return 2.0 * p.N * p.K * oh * ow * (p.C // p.groups) * p.R * p.S

    def float32_tolerance(self, p: Conv2dParams) -> tuple[float, float]:
        return summed_tolerance((p.C // p.groups) * p.R * p.S)


def _channel_bias(p: Conv2dParams, y: Any, bias: Any, relu: bool) -> Any:
    from tvm import te

    def body(*idx: Any) -> Any:
        channel = idx[1] if p.layout == "NCHW" else idx[3]
        value = y[idx] + bias[channel].astype(y.dtype)
        return te.max(value, te.const(0, y.dtype)) if relu else value

    return te.compute(y.shape, body, name="Y_bias_relu" if relu else "Y_bias")


def _bias_ref(p: Conv2dParams, y: np.ndarray, bias: np.ndarray) -> np.ndarray:
    return y + (bias[None, :, None, None] if p.layout == "NCHW" else bias[None, None, None, :])


class Conv2dBiasRelu(Conv2d):
    """conv2d + per-channel bias + ReLU in one kernel."""

    name = "conv2d_bias_relu"
    description = "relu(conv2d(X, W) + bias[k]), NCHW or NHWC; bias in the result dtype"

    def build(self, params: Conv2dParams) -> Any:
        from tvm import te

        (x, w), y = self.conv(params)
        out = self.result_dtype(params)
        bias = te.placeholder((params.K,), out, name="bias")
        y = _channel_bias(params, y, bias, relu=True)
        return te.create_prim_func([x, w, bias, store_as(y, out)])

    def reference(self, params: Conv2dParams, inputs: list[np.ndarray]) -> np.ndarray:
        y = self.conv_ref(params, inputs[0], inputs[1])
        return np.maximum(_bias_ref(params, y, inputs[2].astype(np.float64)), 0)

    def flop(self, p: Conv2dParams) -> float:
        oh, ow = p.out_hw
        return super().flop(p) + 2.0 * p.N * p.K * oh * ow


class Conv2dBnRelu(Conv2dBiasRelu):
    """conv2d + inference BatchNorm + ReLU, with BN folded into the weights and bias.

    The kernel is relu(conv2d(X, W') + b') with W' = W * gamma / sqrt(var + eps) per output
    channel and b' = beta - mean * gamma / sqrt(var + eps): what a deployment compiles. Its
    verification case draws random BN statistics, folds them into the inputs, and expects the
    unfolded conv -> BN -> ReLU, so the folding is checked too.
    """

    name = "conv2d_bn_relu"
    description = "relu(batchnorm(conv2d(X, W))) with BN folded into W' and b'"
    Params = FloatConv2dParams

    def case(
        self, params: Conv2dParams, func: Any, rng: np.random.Generator
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Random BN statistics, folded into the kernel's inputs; in float32 the expected output
        applies the unfolded BN after the convolution (checking the folding too). In float16 the
        folded weights are rounded to float16 before the kernel sees them, so the reference is
        the convolution of exactly those inputs (the folding is checked in float32)."""
        p = params
        x, w = self.make_inputs(params, func, rng)[:2]
        gamma, beta = rng.uniform(0.5, 1.5, p.K), rng.uniform(-0.5, 0.5, p.K)
        mean, var = rng.uniform(-0.2, 0.2, p.K), rng.uniform(0.5, 1.5, p.K)
        scale = gamma / np.sqrt(var + BN_EPS)
        shape = (1, -1, 1, 1) if p.layout == "NCHW" else (1, 1, 1, -1)
        w_folded = w * (scale[:, None, None, None] if p.layout == "NCHW" else scale)
        inputs = [x, w_folded.astype(p.dtype), (beta - mean * scale).astype(p.dtype)]
        if p.dtype != "float32":
            return inputs, Conv2dBiasRelu.reference(self, p, inputs)
        y = self.conv_ref(p, x, w)
        y = (y - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + BN_EPS)
        return inputs, np.maximum(y * gamma.reshape(shape) + beta.reshape(shape), 0)


# -- depthwise ----------------------------------------------------------------------------------
class DepthwiseParams(WindowParams):
    """Input N×C×H×W (or NHWC), one R×S filter per channel (times ``multiplier``)."""

    dtype: FloatsAndInt8 = "float32"
    multiplier: Annotated[int, Field(strict=True, ge=1, le=8)] = 1
    dilation: Dilation = 1

    @model_validator(mode="after")
    def _consistent(self) -> DepthwiseParams:
        if (
            _out(self.H, self.R, self.stride, self.padding, self.dilation) < 1
            or _out(self.W, self.S, self.stride, self.padding, self.dilation) < 1
        ):
            raise ValueError("the kernel (with dilation) is larger than the padded input")
        return self


class DepthwiseConv2d(Operator[DepthwiseParams]):
    """Depthwise 2-D convolution (MobileNet)."""

    name = "depthwise_conv2d"
    description = "depthwise conv2d, NCHW (weights C×m×R×S) or NHWC (R×S×C×m)"
    Params = DepthwiseParams
    example = {"layout": "NCHW", "N": 1, "C": 32, "H": 112, "W": 112, "R": 3, "S": 3, "padding": 1}
    constant_operands = (1,)  # W

    def build(self, p: DepthwiseParams) -> Any:
        from tvm import te, topi

        acc = compute_dtype(p.dtype)
        if p.layout == "NCHW":
            x = te.placeholder((p.N, p.C, p.H, p.W), p.dtype, name="X")
            w = te.placeholder((p.C, p.multiplier, p.R, p.S), p.dtype, name="W")
            y = topi.nn.depthwise_conv2d_nchw(x, w, p.stride, p.padding, p.dilation, acc)
        else:
            x = te.placeholder((p.N, p.H, p.W, p.C), p.dtype, name="X")
            w = te.placeholder((p.R, p.S, p.C, p.multiplier), p.dtype, name="W")
            y = topi.nn.depthwise_conv2d_nhwc(x, w, p.stride, p.padding, p.dilation, out_dtype=acc)
        return te.create_prim_func([x, w, store_as(y, self.result_dtype(p))])

    def result_dtype(self, params: DepthwiseParams) -> str:
        return contraction_result(params.dtype)

    def reference(self, p: DepthwiseParams, inputs: list[np.ndarray]) -> np.ndarray:
        x, w = (v.astype(np.float64) for v in inputs)
        if p.layout == "NHWC":
            x, w = x.transpose(0, 3, 1, 2), w.transpose(2, 3, 0, 1)
        y = conv2d_nchw_ref(
            x, w.reshape(p.C * p.multiplier, 1, p.R, p.S), p.stride, p.padding, p.dilation, p.C
        )
        return y.transpose(0, 2, 3, 1) if p.layout == "NHWC" else y

    def flop(self, p: DepthwiseParams) -> float:
        oh = _out(p.H, p.R, p.stride, p.padding, p.dilation)
        ow = _out(p.W, p.S, p.stride, p.padding, p.dilation)
        return 2.0 * p.N * p.C * p.multiplier * oh * ow * p.R * p.S


# -- transposed -------------------------------------------------------------------------------
class Conv2dTransposeParams(WindowParams):
    """Input N×C×H×W (NCHW only), weights C×K×R×S."""

    layout: Literal["NCHW"] = "NCHW"
    dtype: Floats = "float32"
    K: Channels
    output_padding: Annotated[int, Field(strict=True, ge=0, le=7)] = 0

    @model_validator(mode="after")
    def _consistent(self) -> Conv2dTransposeParams:
        if self.output_padding >= self.stride:
            raise ValueError("output_padding must be smaller than stride")
        if (self.H - 1) * self.stride - 2 * self.padding + self.R + self.output_padding < 1:
            raise ValueError("padding leaves no output")
        return self


class Conv2dTranspose(Operator[Conv2dTransposeParams]):
    """Transposed convolution (deconvolution), NCHW."""

    name = "conv2d_transpose"
    description = "transposed conv2d, NCHW, weights C×K×R×S; stride, padding, output_padding"
    Params = Conv2dTransposeParams
    constant_operands = (1,)  # W
    example = {
        "N": 1,
        "C": 64,
        "H": 28,
        "W": 28,
        "K": 32,
        "R": 4,
        "S": 4,
        "stride": 2,
        "padding": 1,
    }

    def build(self, p: Conv2dTransposeParams) -> Any:
        from tvm import te, topi

        x = te.placeholder((p.N, p.C, p.H, p.W), p.dtype, name="X")
        w = te.placeholder((p.C, p.K, p.R, p.S), p.dtype, name="W")
        y = topi.nn.conv2d_transpose_nchw(
            x,
            w,
            (p.stride, p.stride),
            (p.padding, p.padding),
            compute_dtype(p.dtype),
            (p.output_padding, p.output_padding),
        )
        return te.create_prim_func([x, w, store_as(y, p.dtype)])

    def reference(self, p: Conv2dTransposeParams, inputs: list[np.ndarray]) -> np.ndarray:
        x, w = (v.astype(np.float64) for v in inputs)
        return conv2d_transpose_nchw_ref(x, w, p.stride, p.padding, p.output_padding)

    def flop(self, p: Conv2dTransposeParams) -> float:
        return 2.0 * p.N * p.C * p.H * p.W * p.K * p.R * p.S

    def float32_tolerance(self, p: Conv2dTransposeParams) -> tuple[float, float]:
        return summed_tolerance(p.C * p.R * p.S)


OPERATORS: list[Operator[Any]] = [
    Conv2d(),
    Conv2dBiasRelu(),
    Conv2dBnRelu(),
    DepthwiseConv2d(),
    Conv2dTranspose(),
]
