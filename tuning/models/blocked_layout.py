"""A model's convolutions in a blocked channel layout, kept between layers (NCHW[x]c).

ONNX Runtime's CPU lead on CNNs is structural: its ``NchwcTransformer`` puts convolutions, pools,
adds and activations in NCHW16c on AVX-512 and keeps that layout from one layer to the next, so
the vector is a block of channels and every image size fills it (a 7x7 image is 49 columns: no
whole vectors in NCHW). `to_blocked` does the same on a Relax module before legalisation:
``ConvertLayout`` rewrites every ``conv2d`` whose channels divide into ``block`` to ``NCHW{b}c``
data and ``OIHW{b}i{b}o`` weights (``OIHW1i{b}o`` for a depthwise one; elementwise ops, pools
and reductions follow the layout they are given; a transform is inserted only where a consumer
cannot take it, at the graph's edges),
and `LEGALIZE` lowers such convs to TOPI's ``conv2d_NCHWc`` (depthwise ones to
`depthwise_nchwc`), which the default legaliser refuses. The weights' transforms act on
constants, so ``FoldConstant`` reorders them at compile.

Every function it produces is a workload of its own (its hash differs from the NCHW one's):
schedules tuned in one layout never apply to the other.
"""

from __future__ import annotations

from typing import Any

from tuning.models.bf16_layout import NHWC, is_bf16_conv
from tuning.models.call_rewrite import rewrite_calls

PLAIN, BLOCKED = "plain", "blocked"
LAYOUTS = (PLAIN, BLOCKED)
"""A model's layouts: ``plain`` (as the model is written: NCHW) or ``blocked`` (NCHW[x]c with x
the target's fp32 vector lanes: 16 on AVX-512, 8 on AVX2)."""


def block_for(layout: str, target: Any) -> int:
    """The channel block ``layout`` means on ``target`` (0: plain; a non-CPU target's convs
    stay plain)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    if layout == PLAIN or str(target.kind.name) != "llvm":
        return 0
    from tvm.target import codegen

    if codegen.target_has_features("avx512f", target):
        return 16
    if codegen.target_has_features("avx", target):
        return 8
    return 4


def layouts_for(call: Any, block: int) -> dict[str, list[str]]:
    """The layouts ``ConvertLayout`` should give one call: a regular conv2d ``NCHW{block}c``
    data and ``OIHW{block}i{block}o`` weights; a depthwise one (one group per input channel,
    one filter each: as many out as in) ``OIHW1i{block}o`` weights (ConvertLayout keeps a conv
    whose channels do not divide into blocks as it is); any other NCHW conv (grouped, a channel
    multiplier) NCHW, a transform before it where its input is blocked; no wish for a bf16
    model's NHWC conv (`tuning.models.bf16_layout`) or other ops (they follow their
    inputs)."""
    if getattr(call.op, "name", "") != "relax.nn.conv2d":
        return {}
    if str(call.attrs.data_layout) == NHWC and is_bf16_conv(call):
        return {}  # `tuning.models.bf16_layout` made it the bf16 kernel's layout
    groups = int(call.attrs.groups)
    if groups == 1:
        return {"relax.nn.conv2d": [f"NCHW{block}c", f"OIHW{block}i{block}o"]}
    inputs = [int(d) for d in call.args[0].ty.shape.values][1]
    weights = [int(d) for d in call.args[1].ty.shape.values]
    plain = str(call.attrs.data_layout) == "NCHW" and str(call.attrs.kernel_layout) == "OIHW"
    if plain and groups == inputs == weights[0] and weights[1] == 1:
        return {"relax.nn.conv2d": [f"NCHW{block}c", f"OIHW1i{block}o"]}
    return {"relax.nn.conv2d": ["NCHW", "OIHW"]}


def to_blocked(mod: Any, block: int) -> Any:
    """``mod`` (a Relax module, before legalisation) with its regular and depthwise
    convolutions in ``NCHW{block}c`` (`layouts_for`), ready for ``LegalizeOps(LEGALIZE)``."""
    from tvm import relax

    mod = bounds_as_ops(mod)
    mod = relax.transform.ConvertLayout({}, lambda call: layouts_for(call, block))(mod)
    return relax.transform.Normalize()(mod)


def bounds_as_ops(mod: Any) -> Any:
    """``mod`` with each ``call_tir`` of an elementwise maximum or minimum against a scalar
    constant (how the ONNX importer writes ``Clip``: a ReLU6) made the Relax op it computes:
    ConvertLayout cannot see into a ``call_tir``, and would put every ReLU6 back in NCHW
    between two transforms. A call is rewritten only when its function is structurally the
    one TOPI's op builds for those operands."""
    import tvm
    import tvm_ffi
    from tvm import relax, te, topi

    # The importer guards each bound against NaN (where(isnan(b), inf, b)): folded first.
    mod = relax.transform.FoldConstant()(mod)
    call_tir = tvm.ir.Op.get("relax.call_tir")
    ops = {"maximum": (topi.maximum, relax.op.maximum), "minimum": (topi.minimum, relax.op.minimum)}

    def as_op(call: Any) -> Any:
        if call.op != call_tir or len(call.args[1].fields) != 2:
            return None
        x, bound = call.args[1].fields
        if not isinstance(bound, tvm.ir.expr.Constant) or len(bound.ty.shape.values) != 0:
            return None
        func = mod[call.args[0]]
        shape = list(x.ty.shape.values)  # int64, as Relax writes shapes
        for build, op in ops.values():
            try:  # a shape or dtype TOPI cannot take: not a clip, left as it is
                a = te.placeholder(shape, str(x.ty.dtype), "a")
                b = te.placeholder((), str(bound.ty.dtype), "b")
                expected = te.create_prim_func([a, b, build(a, b)])
            except Exception:  # noqa: BLE001, S112 - see above
                continue
            if tvm_ffi.structural_equal(func, expected.without_attr("global_symbol")):
                return op(x, bound)
        return None

    def rewritten(call: Any) -> Any:
        op = as_op(call)
        return call if op is None else op

    return relax.transform.DeadCodeElimination()(rewrite_calls(mod, rewritten))


def depthwise_nchwc(data: Any, kernel: Any, strides: Any, padding: Any, dilation: Any,
                    out_dtype: str) -> Any:  # fmt: skip
    """A depthwise convolution in NCHW[x]c: ``data`` [N, C/x, H, W, x], ``kernel``
    [C/x, 1, KH, KW, 1, x] (TOPI's ``depthwise_conv2d_NCHWc`` only raises)."""
    from tvm import te, topi

    batch, chunks, height, width, lanes = (int(d) for d in data.shape)
    kh, kw = int(kernel.shape[2]), int(kernel.shape[3])
    (sh, sw), (dh, dw) = (int(v) for v in strides), (int(v) for v in dilation)
    top, left, bottom, right = (int(v) for v in padding)
    padded = topi.nn.pad(data, [0, 0, top, left, 0], [0, 0, bottom, right, 0], name="pad")
    out_h = (height + top + bottom - dh * (kh - 1) - 1) // sh + 1
    out_w = (width + left + right - dw * (kw - 1) - 1) // sw + 1
    ry, rx = te.reduce_axis((0, kh), name="ry"), te.reduce_axis((0, kw), name="rx")
    return te.compute(
        (batch, chunks, out_h, out_w, lanes),
        lambda n, c, y, x, v: te.sum(
            padded[n, c, y * sh + ry * dh, x * sw + rx * dw, v].astype(out_dtype)
            * kernel[c, 0, ry, rx, 0, v].astype(out_dtype),
            axis=[ry, rx],
        ),
        name="depthwise_conv2d_NCHWc",
    )


def _conv2d_nchwc(bb: Any, call: Any) -> Any:
    """A blocked ``relax.nn.conv2d`` lowered by TOPI's ``conv2d_NCHWc`` (a depthwise one by
    `depthwise_nchwc`); any other conv is left for the default legaliser (the zero pipeline's
    ``LegalizeOps``)."""
    from tvm import topi

    attrs = call.attrs
    if not str(attrs.data_layout).endswith("c"):
        return call
    kernel = [int(d) for d in call.args[1].ty.shape.values]
    if int(attrs.groups) != 1:
        if str(attrs.kernel_layout) != f"OIHW1i{kernel[-1]}o" or kernel[1] != 1:
            raise ValueError(f"a blocked grouped conv that is not depthwise: {attrs.kernel_layout}")
        return bb.call_te(depthwise_nchwc, call.args[0], call.args[1], attrs.strides,
                          attrs.padding, attrs.dilation, str(call.ty.dtype),
                          primfunc_name_hint="depthwise_conv2d_NCHWc")  # fmt: skip
    out_dtype = str(call.ty.dtype)  # the conv's output (its out_dtype, else its input's)
    return bb.call_te(
        topi.nn.conv2d_NCHWc,
        call.args[0],
        call.args[1],
        attrs.strides,
        attrs.padding,
        attrs.dilation,
        str(attrs.data_layout),
        str(attrs.out_layout),
        out_dtype,
        primfunc_name_hint="conv2d_NCHWc",
    )


LEGALIZE = {"relax.nn.conv2d": _conv2d_nchwc}
"""``LegalizeOps(customize_legalize_map=LEGALIZE)``: blocked convs lowered, the rest as usual."""
