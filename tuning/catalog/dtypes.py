"""The precisions catalog operators come in, and what each means for a kernel and its check.

- ``float32``: storage and arithmetic in float32.
- ``float16``: storage in float16, arithmetic (and every accumulation) in float32, the result
  rounded to float16 once: what TVM's mixed-precision pass and fp16 inference engines do. The
  reference is computed in float64 from the same float16 inputs and rounded to float16, so it
  models the one rounding the kernel is allowed; the tolerance adds two float16 ulps.
- ``int8``: int8 operands, int32 arithmetic; contractions (matmul, dense, conv) return the int32
  accumulator, as TOPI's ``out_dtype="int32"`` and quantized inference do; max pooling returns
  int8. Integer results are compared exactly.
- ``bfloat16`` (matmul, batch_matmul, dense, conv2d, conv2d_bias_relu): bf16 operands, fp32
  products and sums, an fp32 result (what bf16 autocast and oneDNN's bf16 GEMMs return). A
  product of two bf16 is exact in fp32, so the reference (float64 from the same bf16 inputs) is
  held to the float32 tolerance.
  Only a target with a bf16 unit takes it (`tuning.hardware.bf16`): elsewhere it would be a
  float32 kernel in disguise. numpy spells it ``ml_dtypes.bfloat16`` (`numpy_dtype`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

TOLERANCE_RULES = (
    "float32: the operator's float32 tolerance; "
    "float16 (fp32 arithmetic, one rounding): rtol >= 2e-3, atol + 1e-3 against a float64 "
    "reference rounded to float16; int8 (int32 arithmetic): exact; "
    "bfloat16 (matmul, batch_matmul, dense, conv2d, conv2d_bias_relu: fp32 products and sums, "
    "fp32 result, targets with "
    "AMX-BF16 or AVX512-BF16 only): the float32 tolerance against a float64 reference of the "
    "same bf16 inputs"
)

Float32Only = Annotated[Literal["float32"], Field(description=TOLERANCE_RULES)]
Floats = Annotated[Literal["float32", "float16"], Field(description=TOLERANCE_RULES)]
FloatsAndInt8 = Annotated[Literal["float32", "float16", "int8"], Field(description=TOLERANCE_RULES)]
Contractions = Annotated[
    Literal["float32", "float16", "int8", "bfloat16"], Field(description=TOLERANCE_RULES)
]

COMPUTE_DTYPE = {"float32": "float32", "float16": "float32", "int8": "int32", "bfloat16": "float32"}
BFLOAT16 = "bfloat16"
BF16_SUFFIX = ".bf16.npy"  # a .npy file of a bfloat16 array's uint16 bits (npy has no bf16)
INT8_RANGE = (-128, 128)  # numpy's half-open bounds for random int8 operands


def compute_dtype(dtype: str) -> str:
    """The dtype the arithmetic of an operator stored in ``dtype`` runs in."""
    return COMPUTE_DTYPE[dtype]


def contraction_result(dtype: str) -> str:
    """The result dtype of a matmul/dense/conv on ``dtype`` operands (int8 gives int32,
    bfloat16 float32)."""
    return {"int8": "int32", BFLOAT16: "float32"}.get(dtype, dtype)


def numpy_dtype(dtype: str) -> Any:
    """numpy's dtype for a TVM dtype name (``bfloat16`` is ml_dtypes', which numpy only knows by
    name once ml_dtypes is imported)."""
    if dtype == BFLOAT16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def operand(shape: Any, dtype: str, name: str) -> tuple[Any, Any]:
    """A placeholder stored in ``dtype`` and the view the arithmetic reads (cast to the compute
    dtype when they differ; MetaSchedule inlines the cast)."""
    from tvm import te

    stored = te.placeholder(shape, dtype, name=name)
    wanted = compute_dtype(dtype)
    if wanted == dtype:
        return stored, stored
    return stored, te.compute(stored.shape, lambda *i: stored(*i).astype(wanted), name=f"{name}_c")


def store_as(result: Any, dtype: str) -> Any:
    """``result`` cast to ``dtype`` (the tensor itself when it already has that dtype)."""
    from tvm import te

    if result.dtype == dtype:
        return result
    return te.compute(result.shape, lambda *i: result(*i).astype(dtype), name="Y_store")


def random_operand(
    shape: Any, dtype: str, rng: np.random.Generator, low: float = -1.0, high: float = 1.0
) -> np.ndarray:
    """Random values for an input buffer: uniform in [low, high) for floats, any int8 value,
    small integers for other integer dtypes."""
    if dtype == "int8":
        return rng.integers(*INT8_RANGE, size=shape, dtype=np.int8)
    if dtype == BFLOAT16:
        return rng.uniform(low, high, size=shape).astype(numpy_dtype(dtype))
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(-8, 8, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def round_to(expected: np.ndarray, dtype: str) -> np.ndarray:
    """A float64 reference rounded as a kernel producing ``dtype`` must round it."""
    if dtype == "float16":
        return expected.astype(np.float16).astype(np.float64)
    return expected


def summed_tolerance(terms: int) -> tuple[float, float]:
    """(rtol, atol) of a float32 result that sums ``terms`` products of magnitude <= 1 in an
    order of the schedule's choosing: the rounding error grows with the terms."""
    return 1e-4, 1e-5 + 2e-7 * terms


def widen_tolerance(rtol: float, atol: float, out_dtype: str) -> tuple[float, float]:
    """The float32 tolerance turned into the one for a result of ``out_dtype``."""
    if np.issubdtype(numpy_dtype(out_dtype), np.integer):
        return 0.0, 0.0
    if out_dtype == "float16":
        return max(rtol, 2e-3), atol + 1e-3
    if out_dtype == BFLOAT16:  # 8 significant bits: a ulp is 2^-7 of the value
        return max(rtol, 1.6e-2), atol + 1e-2
    return rtol, atol
