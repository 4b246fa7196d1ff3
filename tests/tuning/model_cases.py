"""Small ONNX and Relax models built by hand for the model tests (no torch/torchvision needed):
a tiny CNN (two 3x3 convs, global pool, dense: 5 tasks), a ResNet-18-shaped CNN for measuring
limits, and hostile files (a 10 GB declared initializer, external data)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TINY_INPUT = ("x", (1, 3, 16, 16), "float32")


def _init(rng: np.random.Generator, name: str, *shape: int) -> Any:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype("float32"), name)


def _he_init(rng: np.random.Generator, name: str, *shape: int) -> Any:
    """Weights scaled by their fan-in (He), biases small: activations stay O(1) through a
    deep net (at std 0.2 everywhere ResNet-18's outputs reached ~1e10, and float32 rounding
    then swamps any numeric comparison)."""
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 0
    std = float(np.sqrt(2.0 / fan_in)) if fan_in else 0.01
    return numpy_helper.from_array((rng.standard_normal(shape) * std).astype("float32"), name)


def tiny_cnn(seed: int = 0) -> Any:
    """conv3x3(3→8)+relu, conv3x3(8→8)+relu, global average pool, flatten, dense(8→10) on a
    1x3x16x16 input "x"; output "y" of 1x10."""
    rng = np.random.default_rng(seed)
    inits = [
        _init(rng, "w1", 8, 3, 3, 3),
        _init(rng, "b1", 8),
        _init(rng, "w2", 8, 8, 3, 3),
        _init(rng, "b2", 8),
        _init(rng, "w3", 10, 8),
        _init(rng, "b3", 10),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def resnet18_like(seed: int = 0, size: int = 224) -> Any:
    """A ResNet-18-shaped CNN (7x7/2 stem, max pool, 4 stages of 2 basic blocks of 64..512
    channels, global pool, dense to 1000) with random He-scaled weights (11.7 M): input "x" of
    1x3x``size``x``size``, output "y" of 1x1000."""
    rng = np.random.default_rng(seed)
    inits: list[Any] = []
    nodes: list[Any] = []
    count = [0]

    def conv(x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        count[0] += 1
        n = count[0]
        inits.append(_he_init(rng, f"w{n}", cout, cin, k, k))
        inits.append(_he_init(rng, f"b{n}", cout))
        pad = k // 2
        nodes.append(helper.make_node("Conv", [x, f"w{n}", f"b{n}"], [f"c{n}"],
                                      pads=[pad] * 4, strides=[stride, stride]))  # fmt: skip
        if not relu:
            return f"c{n}"
        nodes.append(helper.make_node("Relu", [f"c{n}"], [f"r{n}"]))
        return f"r{n}"

    x = conv("x", 3, 64, 7, 2, True)
    nodes.append(helper.make_node("MaxPool", [x], ["mp"], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))  # fmt: skip
    x, cin = "mp", 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = conv(x, cin, cout, 3, stride, True)
            y = conv(y, cout, cout, 3, 1, False)
            short = conv(x, cin, cout, 1, stride, False) if stride != 1 or cin != cout else x
            out = f"s{stage}{block}"
            nodes.append(helper.make_node("Add", [y, short], [out + "a"]))
            nodes.append(helper.make_node("Relu", [out + "a"], [out]))
            x, cin = out, cout
    inits += [_he_init(rng, "fcw", 1000, 512), _he_init(rng, "fcb", 1000)]
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["fl"]),
        helper.make_node("Gemm", ["fl", "fcw", "fcb"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "resnet18_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def huge_initializer() -> Any:
    """A model whose one initializer declares 10 GB (dims only, no data)."""
    model = tiny_cnn()
    big = TensorProto(name="big", data_type=TensorProto.FLOAT, dims=[50_000, 50_000])
    model.graph.initializer.append(big)
    return model


def external_data() -> Any:
    """The tiny CNN with its first weight moved to an external file reference."""
    model = tiny_cnn()
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value="/etc/passwd")
    return model


TINY_RELAX = """
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), "float32"), w: R.Tensor((16, 8), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(y)
            R.output(z)
        return z
"""


def relax_calling(call: str) -> str:
    """A Relax module whose main runs ``call`` (e.g. ``R.call_packed("system", ...)``)."""
    return f"""
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((4, 16), "float32"), w: R.Tensor((16, 8), "float32")):
        y = {call}
        return x
"""
