"""A model's convolutions in a blocked channel layout kept between layers (issue 38): with
``block``, the tuning pipeline puts every regular conv whose channels divide into blocks in
NCHW[x]c, lowers it with TOPI's conv2d_NCHWc (fused with its bias and activation, as the plain
layout's are), folds the weights' reorder into constants, and the compiled model computes what
the plain one does. Its tasks are workloads of their own: a layout never changes another's key."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.tuning.model_cases import _init, tiny_cnn
from tuning.hardware.targets import resolve_target
from tuning.ir import arg_specs, structural_hash
from tuning.models.pipeline import compile_with, extract, tuning_pipeline


def _model_12x12(name: str, nodes: list[Any], inits: list[Any], out_shape: list[int]) -> Any:
    """An ONNX model of ``nodes`` on a 1x3x12x12 input "x", output "y" of ``out_shape``."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def depthwise_cnn() -> Any:
    """conv3x3(3->8), depthwise 3x3 (8 groups) + bias + ReLU6, conv1x1(8->8), global pool on a
    1x3x12x12 input "x": a MobileNet block in small, its ReLU6 a Clip with constant bounds as
    torch.onnx.export writes it."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(1)
    inits = [_init(rng, "w1", 8, 3, 3, 3), _init(rng, "wd", 8, 1, 3, 3), _init(rng, "bd", 8),
             _init(rng, "w2", 8, 8, 1, 1), numpy_helper.from_array(np.float32(0.0), "lo"),
             numpy_helper.from_array(np.float32(6.0), "hi")]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "wd", "bd"], ["d"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Clip", ["d", "lo", "hi"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["c2"]),
        helper.make_node("GlobalAveragePool", ["c2"], ["y"]),
    ]
    return _model_12x12("dw", nodes, inits, [1, 8, 1, 1])


def grouped_cnn() -> Any:
    """conv3x3(3->8), conv3x3(8->8) (blocked), a grouped conv3x3 (2 groups of 4: not
    depthwise) and a depthwise conv with two filters per channel (8->16), global pool on a
    1x3x12x12 input "x"."""
    from onnx import helper

    rng = np.random.default_rng(2)
    inits = [_init(rng, "w1", 8, 3, 3, 3), _init(rng, "w2", 8, 8, 3, 3),
             _init(rng, "wg", 8, 4, 3, 3), _init(rng, "wm", 16, 1, 3, 3)]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c2", "wg"], ["g"], pads=[1, 1, 1, 1], group=2),
        helper.make_node("Conv", ["g", "wm"], ["m"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("GlobalAveragePool", ["m"], ["y"]),
    ]
    return _model_12x12("grouped", nodes, inits, [1, 16, 1, 1])


def test_grouped_convs_that_are_not_depthwise_stay_as_written() -> None:
    """A grouped conv, or a depthwise one with a channel multiplier, after a blocked conv gets
    its input back in NCHW (a transform), and the model computes what the plain one does."""
    names, plain, blocked = _outputs(grouped_cnn(), [1, 3, 12, 12], block=4)
    assert any("conv2d_NCHWc" in n for n in names), names
    assert not any("depthwise_conv2d_NCHWc" in n for n in names), names
    assert any("layout_transform" in n for n in names), names
    np.testing.assert_allclose(blocked, plain, rtol=1e-5, atol=1e-5)


def _outputs(model: Any, shape: list[int], block: int) -> tuple[list[str], Any, Any]:
    """(task names, plain output, blocked output) of ``model`` built untuned."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    mod = from_onnx(model, shape_dict={"x": shape}, keep_params_in_input=False)
    target = tvm.target.Target(resolve_target("host").canonical)
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(shape).astype("f4"))
    outputs = []
    for b in (0, block):
        executable = compile_with(tuning_pipeline(mod, target, block=b), target,
                                  ms.database.MemoryDatabase())  # fmt: skip
        outputs.append(relax.VirtualMachine(executable, tvm.cpu())["main"](x).numpy())
    names = [t.name for t in extract(tuning_pipeline(mod, target, block=block), target)]
    return names, outputs[0], outputs[1]


def test_depthwise_convs_are_blocked_too() -> None:
    names, plain, blocked = _outputs(depthwise_cnn(), [1, 3, 12, 12], block=4)
    depthwise = [n for n in names if "depthwise_conv2d_NCHWc" in n]
    # Bias and ReLU6 fused in: the importer's clip (an opaque call_tir) became Relax's
    # maximum and minimum, which keep the blocked layout.
    assert len(depthwise) == 1 and "maximum" in depthwise[0], names
    assert not [n for n in names if n.startswith(("maximum", "fused_maximum"))], names
    assert any("conv2d_NCHWc" in n and "depthwise" not in n for n in names), names
    np.testing.assert_allclose(blocked, plain, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def fused_pair() -> tuple:  # type: ignore[type-arg]
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(tiny_cnn(), shape_dict={"x": [1, 3, 16, 16]}, keep_params_in_input=False)
    target = tvm.target.Target(resolve_target("host").canonical)
    return target, tuning_pipeline(mod, target), tuning_pipeline(mod, target, block=4)


def test_blocked_convs_are_tasks_of_their_own(fused_pair: tuple) -> None:  # type: ignore[type-arg]
    target, plain, blocked = fused_pair
    plain_tasks = {t.name: t for t in extract(plain, target)}
    blocked_tasks = {t.name: t for t in extract(blocked, target)}
    # The second conv (8 -> 8 channels: two blocks of 4) is blocked, bias and ReLU fused in;
    # the first (3 input channels) stays as it is.
    nchwc = [name for name in blocked_tasks if "conv2d_NCHWc" in name]
    assert len(nchwc) == 1 and "relu" in nchwc[0], sorted(blocked_tasks)
    task = blocked_tasks[nchwc[0]]
    shapes = [shape for shape, _ in arg_specs(task.mod["main"])]
    assert [1, 2, 16, 16, 4] in shapes  # NCHW4c data and output
    assert [2, 2, 3, 3, 4, 4] in shapes  # OIHW4i4o weights
    assert task.layout_free  # the weights are constants: packed at compile like the others
    plain_hashes = {structural_hash(t.mod) for t in plain_tasks.values()}
    assert structural_hash(task.mod) not in plain_hashes
    assert any("conv2d" in name and "NCHWc" not in name for name in blocked_tasks)


def test_a_blocked_model_computes_what_the_plain_one_does(fused_pair: tuple) -> None:  # type: ignore[type-arg]
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    target, plain, blocked = fused_pair
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype("f4"))
    outputs = []
    for fused in (plain, blocked):
        executable = compile_with(fused, target, ms.database.MemoryDatabase())
        outputs.append(relax.VirtualMachine(executable, tvm.cpu())["main"](x).numpy())
    assert outputs[0].shape == (1, 10)
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)
