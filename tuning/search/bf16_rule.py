"""The packed space's rule for bf16 matmuls: `Bf16MicroKernelOr` offers, beside the wrapped
rule's schedules of a block (which widen bf16 to fp32 as they load it), the ``vdpbf16ps``
micro-kernel's (`tuning.search.bf16_dot`) and, on targets with AMX, the AMX tile kernel's
(`tuning.search.amx_tiles`), for the blocks `bf16_dot.bf16_axes` takes; the search measures them
all."""

from __future__ import annotations

from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule

from tuning.search.amx_tiles import amx_tiles
from tuning.search.bf16_conv import bf16_conv_tiles, conv_axes
from tuning.search.bf16_dot import bf16_axes, bf16_tiles
from tuning.search.micro_kernels import inner_and_tiled, tiled_space


@derived_object
class Bf16MicroKernelOr(PyScheduleRule):
    """``inner``'s schedules of a block, plus the bf16 micro-kernel's and (``amx``: the target
    has AMX-BF16) the AMX tile kernel's where `bf16_axes` applies."""

    def __init__(self, inner: Any, budget: int, amx: bool = False) -> None:
        super().__init__()
        self.inner = inner
        self.budget = budget
        self.amx = amx

    def _initialize_with_tune_context(self, context: Any) -> None:
        self.inner._initialize_with_tune_context(context)  # noqa: SLF001 - delegating

    def apply(self, sch: Any, block: Any) -> list[Any]:
        """The wrapped rule's schedules of ``block``, then the bf16 micro-kernel's, then (with
        ``amx``) the AMX tile kernel's (`tuning.search.amx_tiles`) where they apply; for an NHWC
        convolution (`tuning.search.bf16_conv`), the wrapped rule's and the bf16 convolution
        kernel's."""
        found = bf16_axes(sch, block, self.budget)
        if found is None:
            conv = conv_axes(sch, block, self.budget)
            if conv is None:
                return list(self.inner.apply(sch, block))
            return inner_and_tiled(self.inner, sch, block, sch.copy(), bf16_conv_tiles, conv)
        amx = tiled_space(sch.copy(), block, amx_tiles, found) if self.amx else []
        return inner_and_tiled(self.inner, sch, block, sch.copy(), bf16_tiles, found) + amx

    def clone(self) -> Bf16MicroKernelOr:
        """A copy with its own inner rule."""
        return Bf16MicroKernelOr(self.inner.clone(), self.budget, self.amx)
