"""A bf16 model's convolutions in the layout the bf16 convolution kernel reads: NHWC data, HWIO
weights, the padding a step of its own.

`tuning.search.bf16_conv` runs an NHWC convolution as shifted matmuls on ``vdpbf16ps``: a
pixel's channels together, the weight packed at load. `to_nhwc` rewrites a Relax module (after
`tuning.models.precision.to_bfloat16`, before legalisation) so that every regular (one group)
conv2d on bf16 operands is such a convolution: ``ConvertLayout`` puts it in ``NHWC``/``HWIO``
(elementwise ops, pools and adds follow the layout; a transform is inserted only where a
consumer cannot take it, at the graph's edges; the weights' transposes act on constants and
fold at compile), then a padded one reads ``nn.pad`` of its input and pads nothing itself. TOPI
pads inside the convolution's function otherwise, into a bf16 buffer of the function's own,
which TVM's bf16 legalisation widens to fp32: the kernel reads bf16 pairs, so it takes only
convolutions that read a parameter. The pad is a task of its own (a copy of one layer's
activations: ResNet-18's largest is 56x56x64 bf16, 400 KB).

Depthwise and grouped convolutions, and convolutions on fp32 operands, keep their layout.
"""

from __future__ import annotations

from typing import Any

NHWC, HWIO = "NHWC", "HWIO"


def layouts_for(call: Any) -> dict[str, list[str]]:
    """The layouts ``ConvertLayout`` should give one call: ``NHWC``/``HWIO`` for a one-group
    conv2d whose operands are bf16, no wish for any other call."""
    if getattr(call.op, "name", "") != "relax.nn.conv2d" or int(call.attrs.groups) != 1:
        return {}
    if any(str(getattr(arg.ty, "dtype", "")) != "bfloat16" for arg in call.args):
        return {}
    return {"relax.nn.conv2d": [NHWC, HWIO]}


def to_nhwc(mod: Any) -> Any:
    """``mod`` (a Relax module before legalisation) with its bf16 one-group convolutions in
    ``NHWC``/``HWIO`` (`layouts_for`), each padded one reading an ``nn.pad`` of its input."""
    from tvm import relax

    mod = relax.transform.ConvertLayout({}, layouts_for)(mod)
    return relax.transform.Normalize()(padding_apart(relax.transform.Normalize()(mod)))


def padding_apart(mod: Any) -> Any:
    """``mod`` with every NHWC conv2d that pads reading ``nn.pad`` of its input (zeros, the
    same widths) and padding nothing."""
    from tvm import relax
    from tvm.relax import expr_functor

    def rewritten(call: Any) -> Any:
        if getattr(call.op, "name", "") != "relax.nn.conv2d":
            return call
        attrs = call.attrs
        top, left, bottom, right = (int(p) for p in attrs.padding)
        if str(attrs.data_layout) != NHWC or not any((top, left, bottom, right)):
            return call
        data, weight = call.args
        padded = relax.op.nn.pad(data, [0, 0, top, bottom, left, right, 0, 0])
        return relax.op.nn.conv2d(
            padded, weight, attrs.strides, 0, attrs.dilation, attrs.groups, attrs.data_layout,
            attrs.kernel_layout, attrs.out_layout, out_dtype=attrs.out_dtype,
        )  # fmt: skip

    @expr_functor.mutator
    class Rewriter(expr_functor.PyExprMutator):
        def visit_call_(self, call: Any) -> Any:
            return rewritten(super().visit_call_(call))

    rewriter = Rewriter(mod)
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewriter.builder_.update_func(gvar, rewriter.visit_expr(func))
    return rewriter.builder_.get()
