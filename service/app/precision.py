"""The one refusal of a bfloat16 request (an operator's ``params.dtype``, a model's
``precision``) on a target without a bf16 unit: its kernels would be float32 kernels reading
bf16, or built for an instruction it lacks."""

from __future__ import annotations

from service.app.refusals import InvalidInput
from tuning.hardware.bf16 import has_bf16_dot, missing_bf16_words
from tuning.hardware.targets import ResolvedTarget


def require_bf16_unit(target: ResolvedTarget, loc: tuple[str, ...], value: str) -> None:
    """A 422 (``missing_cpu_feature`` at ``loc``) unless ``target`` has a bf16 dot product."""
    if has_bf16_dot(target.tvm()):
        return
    raise InvalidInput(
        loc,
        f"bfloat16 needs a target with {missing_bf16_words()}; target {target.label!r} has"
        " none (an llvm target declares it by its mcpu, or in mattr: +avx512bf16)",
        "missing_cpu_feature",
        value,
    )
