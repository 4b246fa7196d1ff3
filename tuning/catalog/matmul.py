"""matmul: C[M, N] = A[M, K] @ B[K, N]."""

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

MAX_MACS = 2**36  # ~137 GFLOP per call: beyond this one measurement takes seconds


class MatmulParams(OpParams):
    """Shapes of A (M×K) and B (K×N)."""

    M: Dim
    N: Dim
    K: Dim
    dtype: Contractions = "float32"

    @model_validator(mode="after")
    def _not_absurd(self) -> MatmulParams:
        if self.M * self.N * self.K > MAX_MACS:
            raise ValueError(f"M*N*K = {self.M * self.N * self.K} exceeds the limit {MAX_MACS}")
        return self


class Matmul(Operator[MatmulParams]):
    """Dense matrix product of two row-major matrices."""

    name = "matmul"
    description = (
        "C[M,N] = A[M,K] @ B[K,N] (row-major; fp16 accumulates in fp32, int8 in int32, bf16 in"
        " fp32 with an fp32 result)"
    )
    Params = MatmulParams
    example = {"M": 512, "N": 512, "K": 512}
    constant_operands = (1,)  # B, as a layer's weight matrix

    def build(self, params: MatmulParams) -> Any:
        from tvm import te

        a = te.placeholder((params.M, params.K), params.dtype, name="A")
        b = te.placeholder((params.K, params.N), params.dtype, name="B")
        k = te.reduce_axis((0, params.K), name="k")
        acc = compute_dtype(params.dtype)
        c = te.compute(
            (params.M, params.N),
            lambda i, j: te.sum(a[i, k].astype(acc) * b[k, j].astype(acc), axis=k),
            name="C",
        )
        return te.create_prim_func([a, b, store_as(c, self.result_dtype(params))])

    def reference(self, params: MatmulParams, inputs: list[np.ndarray]) -> np.ndarray:
        a, b = inputs
        return a.astype(np.float64) @ b.astype(np.float64)

    def result_dtype(self, params: MatmulParams) -> str:
        return contraction_result(params.dtype)

    def flop(self, params: MatmulParams) -> float:
        return 2.0 * params.M * params.N * params.K

    def float32_tolerance(self, params: MatmulParams) -> tuple[float, float]:
        return summed_tolerance(params.K)
