"""Fast math for a model: TVM's ``FastMathTransform`` (exp, erf, tanh and softmax become TOPI's
polynomial approximations, which vectorise; libm's are scalar calls), extended to the GELU the
ONNX importer writes as ``relax.nn.gelu`` (legalised to an exact ``erf`` only later, where the
transform no longer sees it). Used by `tuning.models.pipeline.tuning_pipeline`.
"""

from __future__ import annotations

import math
from typing import Any


def fast_math(mod: Any) -> Any:
    """``mod`` (a Relax module before legalisation) with its transcendental functions fast."""
    from tvm import relax, topi
    from tvm.relax import expr_functor
    from tvm.relax.transform.fast_math import FastMathCodeGenerator

    def fast_gelu(x: Any) -> Any:
        """x / 2 (1 + erf(x / sqrt 2)), erf as TOPI's fast_erf."""
        erf = topi.fast_erf(topi.multiply(x, 1 / math.sqrt(2)))
        return topi.multiply(x, topi.add(topi.multiply(erf, 0.5), 0.5))

    def fast_gelu_tanh(x: Any) -> Any:
        """x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), tanh as TOPI's fast_tanh."""
        cube = topi.multiply(topi.multiply(x, x), x)
        inner = topi.multiply(topi.add(x, topi.multiply(cube, 0.044715)), math.sqrt(2 / math.pi))
        return topi.multiply(x, topi.add(topi.multiply(topi.fast_tanh(inner), 0.5), 0.5))

    @expr_functor.mutator
    class Rewriter(FastMathCodeGenerator._cls):
        def visit_call_(self, call: Any) -> Any:
            name = getattr(call.op, "name", "")
            if name == "relax.nn.gelu":
                return self.builder_.call_te(fast_gelu, self.visit_expr(call.args[0]))
            if name == "relax.nn.gelu_tanh":
                return self.builder_.call_te(fast_gelu_tanh, self.visit_expr(call.args[0]))
            return super().visit_call_(call)

    rewriter = Rewriter(mod)
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gvar, rewriter.visit_expr(func))
    return rewriter.builder_.get()
