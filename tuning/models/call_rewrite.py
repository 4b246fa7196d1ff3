"""Rewriting a Relax module one call at a time: what the precision, layout and clip rewrites
(`tuning.models.precision`, `tuning.models.bf16_layout`, `tuning.models.blocked_layout`)
share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def rewrite_calls(mod: Any, rewritten: Callable[[Any], Any]) -> Any:
    """``mod`` (a Relax module) with every call in its Relax functions replaced by
    ``rewritten(call)``, the call's arguments rewritten first (``rewritten`` returns the call
    itself to keep it); not normalised."""
    from tvm import relax
    from tvm.relax import expr_functor

    @expr_functor.mutator
    class Rewriter(expr_functor.PyExprMutator):
        def visit_call_(self, call: Any) -> Any:
            return rewritten(super().visit_call_(call))

    rewriter = Rewriter(mod)
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gvar, rewriter.visit_expr(func))
    return rewriter.builder_.get()
