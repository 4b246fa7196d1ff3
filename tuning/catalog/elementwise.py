"""Elementwise operators: add and mul with numpy broadcasting, exp, log, relu, sigmoid, and the
per-channel scale_shift (x * gamma[c] + beta[c])."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import Field, model_validator

from tuning.catalog.base import Dim, Operator, OpParams
from tuning.catalog.dtypes import Floats, operand, random_operand, store_as
from tuning.ir import arg_specs

MAX_ELEMENTS = 2**28
Shape = Annotated[list[Dim], Field(min_length=1, max_length=4)]


def _size(shape: list[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


class UnaryParams(OpParams):
    """Shape of the input (1 to 4 dims)."""

    shape: Shape
    dtype: Floats = "float32"

    @model_validator(mode="after")
    def _bounded(self) -> UnaryParams:
        if _size(self.shape) > MAX_ELEMENTS:
            raise ValueError(f"{_size(self.shape)} elements exceed the limit {MAX_ELEMENTS}")
        return self


class BinaryParams(UnaryParams):
    """Shapes of both operands; ``rhs_shape`` broadcasts against ``shape`` as in numpy."""

    rhs_shape: Annotated[list[Dim], Field(min_length=1, max_length=4)] | None = None

    @model_validator(mode="after")
    def _broadcastable(self) -> BinaryParams:
        if self.rhs_shape is not None:
            try:
                out = np.broadcast_shapes(tuple(self.shape), tuple(self.rhs_shape))
            except ValueError:
                raise ValueError(
                    f"rhs_shape {self.rhs_shape} does not broadcast with shape {self.shape}"
                ) from None
            if list(out) != list(self.shape):
                raise ValueError("the broadcast result must have the lhs shape")
        return self


class _Binary(Operator[BinaryParams]):
    Params = BinaryParams
    example = {"shape": [1, 64, 56, 56], "rhs_shape": [64, 1, 1]}
    topi_name: str
    numpy_fn: Any

    def build(self, params: BinaryParams) -> Any:
        from tvm import te, topi

        a, a_c = operand(params.shape, params.dtype, "A")
        b, b_c = operand(params.rhs_shape or params.shape, params.dtype, "B")
        y = getattr(topi, self.topi_name)(a_c, b_c)
        return te.create_prim_func([a, b, store_as(y, params.dtype)])

    def reference(self, params: BinaryParams, inputs: list[np.ndarray]) -> np.ndarray:
        a, b = (x.astype(np.float64) for x in inputs)
        return type(self).numpy_fn(a, b)

    def flop(self, params: BinaryParams) -> float:
        return float(_size(params.shape))


class Add(_Binary):
    """Elementwise sum with broadcasting."""

    name = "add"
    description = "C = A + B (numpy broadcasting of B)"
    topi_name = "add"
    numpy_fn = np.add


class Mul(_Binary):
    """Elementwise product with broadcasting."""

    name = "mul"
    description = "C = A * B (numpy broadcasting of B)"
    topi_name = "multiply"
    numpy_fn = np.multiply


class _Unary(Operator[UnaryParams]):
    Params = UnaryParams
    example = {"shape": [1, 64, 56, 56]}
    flop_per_element = 1.0
    low = -1.0

    topi_name: str  # dotted path under tvm.topi
    numpy_fn: Any  # float64 reference of one array

    def build(self, params: UnaryParams) -> Any:
        from operator import attrgetter

        from tvm import te, topi

        x, x_c = operand(params.shape, params.dtype, "X")
        y = attrgetter(self.topi_name)(topi)(x_c)
        return te.create_prim_func([x, store_as(y, params.dtype)])

    def reference(self, params: UnaryParams, inputs: list[np.ndarray]) -> np.ndarray:
        return type(self).numpy_fn(inputs[0].astype(np.float64))

    def flop(self, params: UnaryParams) -> float:
        return self.flop_per_element * _size(params.shape)

    def make_inputs(
        self, params: UnaryParams, func: Any, rng: np.random.Generator
    ) -> list[np.ndarray]:
        shape, dtype = arg_specs(func)[0]
        return [random_operand(shape, dtype, rng, low=self.low)]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


class Exp(_Unary):
    """e ** x."""

    name, description, topi_name, numpy_fn = "exp", "Y = exp(X)", "exp", np.exp


class Log(_Unary):
    """Natural logarithm (inputs drawn from [0.01, 1))."""

    name, description, topi_name, numpy_fn = "log", "Y = log(X), X > 0", "log", np.log
    low = 0.01


class Relu(_Unary):
    """max(x, 0)."""

    name, description, topi_name, numpy_fn = "relu", "Y = max(X, 0)", "nn.relu", _relu


class Sigmoid(_Unary):
    """1 / (1 + e ** -x)."""

    name, description, topi_name = "sigmoid", "Y = 1 / (1 + exp(-X))", "sigmoid"
    numpy_fn = _sigmoid
    flop_per_element = 3.0


class ScaleShiftParams(OpParams):
    """NCHW input; gamma and beta have C entries."""

    N: Dim
    C: Dim
    H: Dim
    W: Dim
    dtype: Floats = "float32"

    @model_validator(mode="after")
    def _bounded(self) -> ScaleShiftParams:
        if self.N * self.C * self.H * self.W > MAX_ELEMENTS:
            raise ValueError(f"N*C*H*W exceeds the limit {MAX_ELEMENTS}")
        return self


class ScaleShift(Operator[ScaleShiftParams]):
    """Per-channel affine transform (a folded inference BatchNorm)."""

    name = "scale_shift"
    description = "Y[n,c,h,w] = X[n,c,h,w] * gamma[c] + beta[c]"
    Params = ScaleShiftParams
    example = {"N": 1, "C": 64, "H": 56, "W": 56}

    def build(self, params: ScaleShiftParams) -> Any:
        from tvm import te

        x, x_c = operand((params.N, params.C, params.H, params.W), params.dtype, "X")
        gamma, gamma_c = operand((params.C,), params.dtype, "gamma")
        beta, beta_c = operand((params.C,), params.dtype, "beta")
        y = te.compute(
            x.shape, lambda n, c, h, w: x_c[n, c, h, w] * gamma_c[c] + beta_c[c], name="Y"
        )
        return te.create_prim_func([x, gamma, beta, store_as(y, params.dtype)])

    def reference(self, params: ScaleShiftParams, inputs: list[np.ndarray]) -> np.ndarray:
        x, gamma, beta = (v.astype(np.float64) for v in inputs)
        return x * gamma[None, :, None, None] + beta[None, :, None, None]

    def flop(self, params: ScaleShiftParams) -> float:
        return 2.0 * params.N * params.C * params.H * params.W


OPERATORS: list[Operator[Any]] = [Add(), Mul(), Exp(), Log(), Relu(), Sigmoid(), ScaleShift()]
