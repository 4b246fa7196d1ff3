"""A model's precision: ``float32`` (as the model is written) or ``bfloat16`` (its matmuls and
convolutions read bf16 operands and sum in float32; everything else stays float32).

`to_bfloat16` rewrites a Relax module before legalisation (`tuning.models.pipeline`): each
float32 ``matmul`` and ``conv2d`` gets its operands cast to bf16 and ``out_dtype`` float32. The
casts of constant weights fold into bf16 constants (half the bytes to stream); an
activation's cast fuses into the epilogue of the op that produces it, so a layer writes bf16
for the next one to read (measured on a small CNN: each conv task reads bf16 data and
weights, the ReLU before the next conv writes bf16). The model's inputs and outputs keep the
dtypes it declares.
"""

from __future__ import annotations

from typing import Any

from tuning.models.call_rewrite import rewrite_calls

FLOAT32, BFLOAT16 = "float32", "bfloat16"
PRECISIONS = (FLOAT32, BFLOAT16)
"""A model's precisions: ``float32`` (as written) or ``bfloat16`` (`to_bfloat16`)."""

CONTRACTIONS = ("relax.matmul", "relax.nn.conv2d")
"""The ops `to_bfloat16` runs in bf16: those whose flops are a model's."""


def check_precision(precision: str) -> None:
    """`ValueError` unless ``precision`` is one of `PRECISIONS`."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(PRECISIONS)}")


def in_precision(mod: Any, precision: str) -> Any:
    """``mod`` (a Relax module before legalisation) in ``precision``."""
    check_precision(precision)
    return mod if precision == FLOAT32 else to_bfloat16(mod)


def to_bfloat16(mod: Any) -> Any:
    """``mod`` with every `CONTRACTIONS` call on two float32 operands reading them as bf16
    and writing float32 (its sums in float32, as the bf16 units do); other calls unchanged."""
    from tvm import relax

    def bf16(expr: Any) -> Any:
        return relax.op.astype(expr, BFLOAT16)

    def rewritten(call: Any) -> Any:
        name = getattr(call.op, "name", "")
        if name not in CONTRACTIONS or len(call.args) != 2:
            return call
        lhs, rhs = call.args
        if any(str(getattr(arg.ty, "dtype", "")) != FLOAT32 for arg in (lhs, rhs)):
            return call
        if str(getattr(call.ty, "dtype", "")) != FLOAT32:
            return call
        if name == "relax.matmul":
            return relax.op.matmul(bf16(lhs), bf16(rhs), out_dtype=FLOAT32)
        attrs = call.attrs
        return relax.op.nn.conv2d(
            bf16(lhs), bf16(rhs), attrs.strides, attrs.padding, attrs.dilation, attrs.groups,
            attrs.data_layout, attrs.kernel_layout, attrs.out_layout, out_dtype=FLOAT32,
        )  # fmt: skip

    return relax.transform.Normalize()(rewrite_calls(mod, rewritten))
