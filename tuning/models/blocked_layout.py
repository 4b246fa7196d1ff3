"""A model's convolutions in a blocked channel layout, kept between layers (NCHW[x]c).

ONNX Runtime's CPU lead on CNNs is structural: its ``NchwcTransformer`` puts convolutions, pools,
adds and activations in NCHW16c on AVX-512 and keeps that layout from one layer to the next, so
the vector is a block of channels and every image size fills it (a 7x7 image is 49 columns: no
whole vectors in NCHW). `to_blocked` does the same on a Relax module before legalisation:
``ConvertLayout`` rewrites every ``conv2d`` whose channels divide into ``block`` to ``NCHW{b}c``
data and ``OIHW{b}i{b}o`` weights (elementwise ops, pools and reductions follow the layout they
are given; a transform is inserted only where a consumer cannot take it, at the graph's edges),
and `LEGALIZE` lowers such convs to TOPI's ``conv2d_NCHWc``, which the default legaliser
refuses. The weights' transforms act on constants, so ``FoldConstant`` reorders them at compile.

Every function it produces is a workload of its own (its hash differs from the NCHW one's):
schedules tuned in one layout never apply to the other.
"""

from __future__ import annotations

from typing import Any


def blocked(block: int) -> dict[str, list[str]]:
    """ConvertLayout's desired layouts for ``block``-channel blocks."""
    return {"relax.nn.conv2d": [f"NCHW{block}c", f"OIHW{block}i{block}o"]}


def to_blocked(mod: Any, block: int) -> Any:
    """``mod`` (a Relax module, before legalisation) with its regular convolutions in
    ``NCHW{block}c`` (`blocked`), ready for ``LegalizeOps(LEGALIZE)``. Grouped and depthwise
    convolutions and convs whose channels do not divide into ``block`` stay as they are."""
    from tvm import relax

    mod = relax.transform.ConvertLayout(blocked(block))(mod)
    return relax.transform.Normalize()(mod)


def _conv2d_nchwc(bb: Any, call: Any) -> Any:
    """A blocked ``relax.nn.conv2d`` lowered by TOPI's ``conv2d_NCHWc``; any other conv is
    left for the default legaliser (the zero pipeline's ``LegalizeOps``)."""
    from tvm import topi

    attrs = call.attrs
    if not str(attrs.data_layout).endswith("c") or int(attrs.groups) != 1:
        return call
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
