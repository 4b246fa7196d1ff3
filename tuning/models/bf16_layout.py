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
activations: ResNet-18's largest is its stem's 230x230x4 bf16, 423 KB).

A convolution on an odd number of channels (an RGB stem) reads one zero channel more, and its
weight one zero input channel more (folded at compile where the weight is a constant), so
that its channels pair up for ``vdpbf16ps``. Depthwise and grouped convolutions, and
convolutions on fp32 operands, keep their layout.
"""

from __future__ import annotations

from typing import Any

from tuning.models.call_rewrite import rewrite_calls

NHWC, HWIO = "NHWC", "HWIO"


def layouts_for(call: Any) -> dict[str, list[str]]:
    """The layouts ``ConvertLayout`` should give one call: ``NHWC``/``HWIO`` for a one-group
    conv2d whose operands are bf16 (`is_bf16_conv`); any other conv2d the layouts it has (no
    wish would have it follow its input's); no wish for other calls (they follow their
    inputs)."""
    if getattr(call.op, "name", "") != "relax.nn.conv2d":
        return {}
    if not is_bf16_conv(call):
        return {"relax.nn.conv2d": [str(call.attrs.data_layout), str(call.attrs.kernel_layout)]}
    return {"relax.nn.conv2d": [NHWC, HWIO]}


def is_bf16_conv(call: Any) -> bool:
    """Whether ``call`` (a Relax ``conv2d``) is one group on bf16 operands: the kernel's."""
    if int(call.attrs.groups) != 1:
        return False
    return all(str(getattr(arg.ty, "dtype", "")) == "bfloat16" for arg in call.args)


def to_nhwc(mod: Any) -> Any:
    """``mod`` (a Relax module before legalisation) with its bf16 one-group convolutions in
    ``NHWC``/``HWIO`` (`layouts_for`), each padded one reading an ``nn.pad`` of its input."""
    from tvm import relax

    mod = relax.transform.ConvertLayout({}, layouts_for)(mod)
    return relax.transform.Normalize()(padding_apart(relax.transform.Normalize()(mod)))


def _channels(weight: Any) -> int:
    """The input channels of an HWIO weight, 0 where its shape is not known numbers."""
    try:
        return int(weight.ty.shape.values[2])
    except (AttributeError, TypeError, IndexError):
        return 0


def padding_apart(mod: Any) -> Any:
    """``mod`` with every NHWC/HWIO `is_bf16_conv` that pads, or reads an odd number of
    channels, reading
    ``nn.pad`` of its input (zeros: the same widths, one channel more where they are odd, the
    weight padded alike) and padding nothing."""
    from tvm import relax

    def rewritten(call: Any) -> Any:
        if getattr(call.op, "name", "") != "relax.nn.conv2d":
            return call
        attrs = call.attrs
        if (str(attrs.data_layout), str(attrs.kernel_layout)) != (NHWC, HWIO):
            return call
        if not is_bf16_conv(call):
            return call
        top, left, bottom, right = (int(p) for p in attrs.padding)
        data, weight = call.args
        odd = _channels(weight) % 2
        if not any((top, left, bottom, right, odd)):
            return call
        data = relax.op.nn.pad(data, [0, 0, top, bottom, left, right, 0, odd])
        if odd:  # a zero channel more in both: no products change, the channels pair up
            weight = relax.op.nn.pad(weight, [0, 0, 0, 0, 0, 1, 0, 0])
        return relax.op.nn.conv2d(
            data, weight, attrs.strides, 0, attrs.dilation, attrs.groups, attrs.data_layout,
            attrs.kernel_layout, attrs.out_layout, out_dtype=attrs.out_dtype,
        )  # fmt: skip

    return rewrite_calls(mod, rewritten)
