"""Pooling (max/avg 2-D in NCHW and NHWC, global avg/max) and normalisation (batch_norm in
inference form, layer_norm, softmax)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from tuning.catalog.base import Dim, Operator, OpParams
from tuning.catalog.conv import Channels, Spatial, WindowParams
from tuning.catalog.dtypes import Floats, FloatsAndInt8, compute_dtype, operand, store_as

MAX_ELEMENTS = 2**28


class Pool2dParams(WindowParams):
    """Input N×C×H×W (or NHWC), an R×S window."""

    dtype: FloatsAndInt8 = "float32"

    @model_validator(mode="after")
    def _consistent(self) -> Pool2dParams:
        if self.padding > min(self.R, self.S) // 2:
            raise ValueError("padding must be at most half the window (as in PyTorch)")
        if self.H + 2 * self.padding < self.R or self.W + 2 * self.padding < self.S:
            raise ValueError("the window is larger than the padded input")
        return self

    def out_hw(self) -> tuple[int, int]:
        """Output height and width."""
        return (
            (self.H + 2 * self.padding - self.R) // self.stride + 1,
            (self.W + 2 * self.padding - self.S) // self.stride + 1,
        )


class _Pool2d(Operator[Pool2dParams]):
    Params: type[Pool2dParams] = Pool2dParams  # a subclass may narrow it
    example = {
        "layout": "NCHW",
        "N": 1,
        "C": 64,
        "H": 112,
        "W": 112,
        "R": 3,
        "S": 3,
        "stride": 2,
        "padding": 1,
    }
    pool_type: str

    def build(self, p: Pool2dParams) -> Any:
        from tvm import te, topi

        shape = (p.N, p.C, p.H, p.W) if p.layout == "NCHW" else (p.N, p.H, p.W, p.C)
        x, x_c = operand(shape, p.dtype, "X")
        y = topi.nn.pool2d(
            x_c,
            (p.R, p.S),
            (p.stride, p.stride),
            (1, 1),
            [p.padding] * 4,
            self.pool_type,
            False,
            p.layout,
            True,
        )
        return te.create_prim_func([x, store_as(y, p.dtype)])

    def reference(self, p: Pool2dParams, inputs: list[np.ndarray]) -> np.ndarray:
        x = inputs[0].astype(np.float64)
        if p.layout == "NHWC":
            x = x.transpose(0, 3, 1, 2)
        fill = -np.inf if self.pool_type == "max" else 0.0
        xp = np.pad(x, ((0, 0), (0, 0), (p.padding,) * 2, (p.padding,) * 2), constant_values=fill)
        oh, ow = p.out_hw()
        windows = [
            xp[
                :,
                :,
                i : i + p.stride * (oh - 1) + 1 : p.stride,
                j : j + p.stride * (ow - 1) + 1 : p.stride,
            ]
            for i in range(p.R)
            for j in range(p.S)
        ]
        y = np.max(windows, axis=0) if self.pool_type == "max" else np.mean(windows, axis=0)
        return y.transpose(0, 2, 3, 1) if p.layout == "NHWC" else y

    def flop(self, p: Pool2dParams) -> float:
        oh, ow = p.out_hw()
        return float(p.N * p.C * oh * ow * p.R * p.S)


class MaxPool2d(_Pool2d):
    """Max pooling."""

    name = "max_pool2d"
    description = "2-D max pooling, NCHW or NHWC"
    pool_type = "max"


class FloatPool2dParams(Pool2dParams):
    """Pooling parameters for float data only (an int8 average needs requantisation)."""

    dtype: Floats = "float32"


class AvgPool2d(_Pool2d):
    """Average pooling (padding counts in the average, as in PyTorch's default)."""

    name = "avg_pool2d"
    Params = FloatPool2dParams
    description = "2-D average pooling, NCHW or NHWC, count_include_pad"
    pool_type = "avg"


class GlobalPoolParams(OpParams):
    """Input N×C×H×W (or NHWC); ``pool`` picks avg or max over H and W."""

    layout: Literal["NCHW", "NHWC"] = "NCHW"
    pool: Literal["avg", "max"] = "avg"
    N: Dim
    C: Channels
    H: Spatial
    W: Spatial
    dtype: Floats = "float32"


class GlobalPool(Operator[GlobalPoolParams]):
    """Global average or max pooling over the spatial dimensions."""

    name = "global_pool"
    description = "global avg/max pooling over H and W, NCHW or NHWC (keeps 1×1 spatial dims)"
    Params = GlobalPoolParams
    example = {"layout": "NCHW", "pool": "avg", "N": 1, "C": 2048, "H": 7, "W": 7}

    def build(self, p: GlobalPoolParams) -> Any:
        from tvm import te, topi

        shape = (p.N, p.C, p.H, p.W) if p.layout == "NCHW" else (p.N, p.H, p.W, p.C)
        x, x_c = operand(shape, p.dtype, "X")
        y = topi.nn.global_pool(x_c, p.pool, p.layout)
        return te.create_prim_func([x, store_as(y, p.dtype)])

    def reference(self, p: GlobalPoolParams, inputs: list[np.ndarray]) -> np.ndarray:
        axes = (2, 3) if p.layout == "NCHW" else (1, 2)
        reduce = np.max if p.pool == "max" else np.mean
        return reduce(inputs[0].astype(np.float64), axis=axes, keepdims=True)

    def flop(self, p: GlobalPoolParams) -> float:
        return float(p.N * p.C * p.H * p.W)


class BatchNormParams(OpParams):
    """NCHW input; gamma, beta, moving mean and variance have C entries."""

    N: Dim
    C: Channels
    H: Spatial
    W: Spatial
    epsilon: Annotated[float, Field(gt=0, le=1e-1)] = 1e-5
    dtype: Floats = "float32"


class BatchNorm(Operator[BatchNormParams]):
    """Inference BatchNorm: (x - mean) / sqrt(var + eps) * gamma + beta per channel."""

    name = "batch_norm"
    description = "inference batch norm over C of NCHW (moving statistics as inputs)"
    Params = BatchNormParams
    example = {"N": 1, "C": 64, "H": 56, "W": 56}

    def build(self, p: BatchNormParams) -> Any:
        from tvm import te

        x, x_c = operand((p.N, p.C, p.H, p.W), p.dtype, "X")
        stats = [operand((p.C,), p.dtype, n) for n in ("gamma", "beta", "mean", "var")]
        gamma, beta, mean, var = (view for _, view in stats)
        y = te.compute(
            x.shape,
            lambda n, c, h, w: (
                (x_c[n, c, h, w] - mean[c])
                / te.sqrt(var[c] + te.const(p.epsilon, compute_dtype(p.dtype)))
                * gamma[c]
                + beta[c]
            ),
            name="Y",
        )
        return te.create_prim_func([x, *(s for s, _ in stats), store_as(y, p.dtype)])

    def make_inputs(
        self, params: BatchNormParams, func: Any, rng: np.random.Generator
    ) -> list[np.ndarray]:
        x, gamma, beta, mean, var = super().make_inputs(params, func, rng)
        return [x, gamma, beta, mean, (np.abs(var) + 0.5).astype(var.dtype)]

    def reference(self, p: BatchNormParams, inputs: list[np.ndarray]) -> np.ndarray:
        x, gamma, beta, mean, var = (v.astype(np.float64) for v in inputs)
        c = (None, slice(None), None, None)
        return (x - mean[c]) / np.sqrt(var[c] + p.epsilon) * gamma[c] + beta[c]

    def flop(self, p: BatchNormParams) -> float:
        return 4.0 * p.N * p.C * p.H * p.W


class RowsParams(OpParams):
    """A rows×cols matrix, normalised along the last axis."""

    rows: Annotated[int, Field(strict=True, ge=1, le=65536)]
    cols: Annotated[int, Field(strict=True, ge=1, le=65536)]
    dtype: Floats = "float32"

    @model_validator(mode="after")
    def _bounded(self) -> RowsParams:
        if self.rows * self.cols > MAX_ELEMENTS:
            raise ValueError(f"rows*cols exceeds the limit {MAX_ELEMENTS}")
        return self


class LayerNormParams(RowsParams):
    """rows×cols input; gamma and beta have cols entries."""

    epsilon: Annotated[float, Field(gt=0, le=1e-1)] = 1e-5


class LayerNorm(Operator[LayerNormParams]):
    """Layer normalisation over the last axis."""

    name = "layer_norm"
    description = "layer norm over the last axis of a rows×cols input, with gamma and beta"
    Params = LayerNormParams
    example = {"rows": 128, "cols": 768}

    def build(self, p: LayerNormParams) -> Any:
        from tvm import te, topi

        x, x_c = operand((p.rows, p.cols), p.dtype, "X")
        gamma, gamma_c = operand((p.cols,), p.dtype, "gamma")
        beta, beta_c = operand((p.cols,), p.dtype, "beta")
        y = topi.nn.layer_norm(x_c, gamma_c, beta_c, [-1], p.epsilon)
        return te.create_prim_func([x, gamma, beta, store_as(y, p.dtype)])

    def reference(self, p: LayerNormParams, inputs: list[np.ndarray]) -> np.ndarray:
        x, gamma, beta = (v.astype(np.float64) for v in inputs)
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + p.epsilon) * gamma + beta

    def flop(self, p: LayerNormParams) -> float:
        return 8.0 * p.rows * p.cols


class Softmax(Operator[RowsParams]):
    """Softmax over the last axis."""

    name = "softmax"
    description = "softmax over the last axis of a rows×cols input"
    Params = RowsParams
    example = {"rows": 128, "cols": 1000}

    def build(self, p: RowsParams) -> Any:
        from tvm import te, topi

        x, x_c = operand((p.rows, p.cols), p.dtype, "X")
        return te.create_prim_func([x, store_as(topi.nn.softmax(x_c, axis=-1), p.dtype)])

    def reference(self, p: RowsParams, inputs: list[np.ndarray]) -> np.ndarray:
        x = inputs[0].astype(np.float64)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def flop(self, p: RowsParams) -> float:
        return 5.0 * p.rows * p.cols


OPERATORS: list[Operator[Any]] = [
    MaxPool2d(),
    AvgPool2d(),
    GlobalPool(),
    BatchNorm(),
    LayerNorm(),
    Softmax(),
]
