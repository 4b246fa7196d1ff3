"""MobileNet-V2 (Sandler et al. 2018, width 1.0) as an ONNX graph built by hand with random
He-scaled weights (3.5 M), batch 1: a 3x3/2 stem of 32, 17 inverted residual blocks (1x1
expansion, 3x3 depthwise, 1x1 linear projection, a residual where shapes allow), a 1x1 conv to
1280, global pool, dense to 1000. BatchNorm is folded into the convs' biases, as exported
inference graphs have it; ReLU6 is Clip(0, 6)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

# (expansion t, output channels c, repeats n, first stride s), the paper's Table 2.
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip


def mobilenet_v2(size: int = 224, seed: int = 0) -> Any:
    """The model on an input "x" of 1x3x``size``x``size``; output "y" of 1x1000."""
    rng = np.random.default_rng(seed)
    inits: list[Any] = []
    nodes: list[Any] = []
    count = [0]

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    lo, hi = const("relu6_lo", np.array(0.0)), const("relu6_hi", np.array(6.0))

    def conv(x: str, cin: int, cout: int, k: int, stride: int, groups: int, relu6: bool) -> str:
        count[0] += 1
        n = count[0]
        fan_in = cin // groups * k * k
        w = const(f"w{n}", rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2 / fan_in))
        b = const(f"b{n}", rng.standard_normal(cout) * 0.01)
        nodes.append(helper.make_node("Conv", [x, w, b], [f"c{n}"], pads=[k // 2] * 4,
                                      strides=[stride, stride], group=groups))  # fmt: skip
        if not relu6:
            return f"c{n}"
        nodes.append(helper.make_node("Clip", [f"c{n}", lo, hi], [f"r{n}"]))
        return f"r{n}"

    x, cin = conv("x", 3, 32, 3, 2, 1, True), 32
    for t, c, repeats, first_stride in BLOCKS:
        for i in range(repeats):
            stride = first_stride if i == 0 else 1
            hidden = cin * t
            y = conv(x, cin, hidden, 1, 1, 1, True) if t != 1 else x
            y = conv(y, hidden, hidden, 3, stride, hidden, True)
            y = conv(y, hidden, c, 1, 1, 1, False)
            if stride == 1 and cin == c:
                nodes.append(helper.make_node("Add", [y, x], [f"{y}_res"]))
                y = f"{y}_res"
            x, cin = y, c
    x = conv(x, cin, 1280, 1, 1, 1, True)
    fcw = const("fcw", rng.standard_normal((1000, 1280)) * np.sqrt(2 / 1280))
    fcb = const("fcb", np.zeros(1000))
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["fl"]),
        helper.make_node("Gemm", ["fl", fcw, fcb], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mobilenet_v2",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
