"""batch_matmul and dense (with or without bias: the MatMul+Add fusion)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import model_validator

from tuning.catalog.base import Dim, Operator, OpParams
from tuning.catalog.dtypes import (
    Contractions,
    compute_dtype,
    contraction_result,
    store_as,
    summed_tolerance,
)
from tuning.catalog.matmul import MAX_MACS


class BatchMatmulParams(OpParams):
    """A is B×M×K, the second operand B×K×N."""

    B: Dim
    M: Dim
    N: Dim
    K: Dim
    dtype: Contractions = "float32"

    @model_validator(mode="after")
    def _not_absurd(self) -> BatchMatmulParams:
        if self.B * self.M * self.N * self.K > MAX_MACS:
            raise ValueError(f"B*M*N*K exceeds the limit {MAX_MACS}")
        return self


class BatchMatmul(Operator[BatchMatmulParams]):
    """A batch of independent matrix products."""

    name = "batch_matmul"
    description = "C[b,M,N] = A[b,M,K] @ B[b,K,N]"
    Params = BatchMatmulParams
    example = {"B": 12, "M": 128, "N": 64, "K": 128}

    def build(self, params: BatchMatmulParams) -> Any:
        from tvm import te

        a = te.placeholder((params.B, params.M, params.K), params.dtype, name="A")
        b = te.placeholder((params.B, params.K, params.N), params.dtype, name="B")
        k = te.reduce_axis((0, params.K), name="k")
        acc = compute_dtype(params.dtype)
        c = te.compute(
            (params.B, params.M, params.N),
            lambda n, i, j: te.sum(a[n, i, k].astype(acc) * b[n, k, j].astype(acc), axis=k),
            name="C",
        )
        return te.create_prim_func([a, b, store_as(c, self.result_dtype(params))])

    def result_dtype(self, params: BatchMatmulParams) -> str:
        return contraction_result(params.dtype)

    def reference(self, params: BatchMatmulParams, inputs: list[np.ndarray]) -> np.ndarray:
        a, b = (x.astype(np.float64) for x in inputs)
        return a @ b

    def flop(self, params: BatchMatmulParams) -> float:
        return 2.0 * params.B * params.M * params.N * params.K

    def float32_tolerance(self, params: BatchMatmulParams) -> tuple[float, float]:
        return summed_tolerance(params.K)


class DenseParams(OpParams):
    """X is M×K, the weight N×K (as in a fully connected layer), an optional bias of N (in the
    result dtype: int32 for int8 operands, as in quantized inference; float32 for bfloat16)."""

    M: Dim
    N: Dim
    K: Dim
    bias: bool = False
    dtype: Contractions = "float32"

    @model_validator(mode="after")
    def _not_absurd(self) -> DenseParams:
        if self.M * self.N * self.K > MAX_MACS:
            raise ValueError(f"M*N*K exceeds the limit {MAX_MACS}")
        return self


class Dense(Operator[DenseParams]):
    """A fully connected layer: X @ W^T (+ bias)."""

    name = "dense"
    description = "Y[M,N] = X[M,K] @ W[N,K]^T (+ bias[N] when bias=true: MatMul+Add fused)"
    Params = DenseParams
    example = {"M": 1, "N": 1000, "K": 2048, "bias": True}
    constant_operands = (1,)  # W

    def build(self, params: DenseParams) -> Any:
        from tvm import te, topi

        x = te.placeholder((params.M, params.K), params.dtype, name="X")
        w = te.placeholder((params.N, params.K), params.dtype, name="W")
        acc, out = compute_dtype(params.dtype), self.result_dtype(params)
        if params.bias:
            b = te.placeholder((params.N,), out, name="bias")
            y = topi.nn.dense(x, w, out_dtype=acc)
            y = te.compute(y.shape, lambda i, j: y[i, j] + b[j].astype(acc), name="Y_bias")
            return te.create_prim_func([x, w, b, store_as(y, out)])
        return te.create_prim_func([x, w, store_as(topi.nn.dense(x, w, out_dtype=acc), out)])

    def result_dtype(self, params: DenseParams) -> str:
        return contraction_result(params.dtype)

    def reference(self, params: DenseParams, inputs: list[np.ndarray]) -> np.ndarray:
        x, w = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
        y = x @ w.T
        return y + inputs[2].astype(np.float64) if params.bias else y

    def flop(self, params: DenseParams) -> float:
        return 2.0 * params.M * params.N * params.K + (params.M * params.N if params.bias else 0)

    def float32_tolerance(self, params: DenseParams) -> tuple[float, float]:
        return summed_tolerance(params.K)


OPERATORS: list[Operator[Any]] = [BatchMatmul(), Dense()]
