"""The one refusal of bfloat16 work (an operator's ``params.dtype``, a model's ``precision``,
raw TIR or a build's uploaded tasks with bf16 buffers) on a target without a bf16 unit: its
kernels would be float32 kernels reading bf16, or built for an instruction it lacks."""

from __future__ import annotations

from collections.abc import Sequence

from service.app.refusals import InvalidInput
from tuning.hardware.bf16 import has_bf16_dot, missing_bf16_words
from tuning.hardware.targets import ResolvedTarget


def mentions_bf16(mod_json: str) -> bool:
    """Whether a workload's module (TVM JSON, as the isolated parser re-derived it) has a
    bfloat16 buffer or value: TVM writes a dtype as its name, a JSON string. Read as text, never
    loaded here (user input); a name that happens to spell it only earns a refusal."""
    return '"bfloat16"' in mod_json


def require_bf16_unit(target: ResolvedTarget, loc: Sequence[str | int], value: str) -> None:
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
