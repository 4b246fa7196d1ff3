"""A model in bfloat16 (issue 39, item 5): its matmuls and convolutions read bf16 operands and
sum in float32, everything else as float32 does; its tasks are workloads of their own; a compile
in the jail checks it against float32 (cosine, top class) and refuses a model bf16 breaks.

These run on any x86 host: where the CPU has no bf16 unit, TVM computes bf16 in float32 on the
same rounded operands (what the service refuses to tune there, but the numbers are bf16's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper

from tests.tuning.model_cases import tiny_cnn
from tuning.hardware.host import host_target_spec
from tuning.ir import arg_specs, structural_hash
from tuning.models.frontends import relax_module
from tuning.models.inputs import ModelInput
from tuning.models.pipeline import ExtractedTask, extract, tuning_pipeline
from tuning.models.precision import check_precision
from tuning.models.run import MIN_COSINE, OutputsDiffer, agreement
from tuning.untrusted.user_model import ModelRejected, compile_model, parse_model

TINY = [ModelInput("x", (1, 3, 16, 16), "float32")]
CONTRACTIONS = ("conv2d", "matmul")


@pytest.fixture(scope="module")
def target() -> dict[str, Any]:
    return host_target_spec()


def _tasks(precision: str, target: dict[str, Any]) -> dict[str, ExtractedTask]:
    mod = relax_module("onnx", tiny_cnn().SerializeToString(), TINY)
    tvm_target = tvm.target.Target(target)
    fused = tuning_pipeline(mod, tvm_target, precision=precision)
    return {task.name: task for task in extract(fused, tvm_target)}


def test_bf16_contractions_read_bf16_and_are_workloads_of_their_own(
    target: dict[str, Any],
) -> None:
    fp32, bf16 = _tasks("float32", target), _tasks("bfloat16", target)
    contractions = [t for n, t in bf16.items() if any(c in n for c in CONTRACTIONS)]
    assert len(contractions) == 3, sorted(bf16)  # two convs and the dense
    for task in contractions:
        specs = arg_specs(task.mod["main"])
        # data and weights in bf16; the bias and the sum in float32 (an output is bf16 only
        # where the cast for the next layer's input fused into this epilogue)
        assert [dtype for _, dtype in specs[:2]] == ["bfloat16", "bfloat16"], (task.name, specs)
        assert specs[2][1] == "float32", (task.name, specs)
        assert task.layout_free  # bf16 weights are constants, packed at compile as fp32 ones
    assert any(arg_specs(t.mod["main"])[-1][1] == "bfloat16" for t in contractions)
    fp32_hashes = {structural_hash(t.mod) for t in fp32.values()}
    assert not fp32_hashes & {structural_hash(t.mod) for t in contractions}
    # On CPU the convolutions are NHWC (the bf16 kernel's layout) and read their input padded
    # by a task of its own (a padded copy inside the task would be widened to fp32).
    convs = [t for n, t in bf16.items() if "conv2d" in n]
    channels = []
    for task in convs:
        (data, data_dtype), (weight, _) = arg_specs(task.mod["main"])[:2]
        assert data == [1, 18, 18, weight[2]] and data_dtype == "bfloat16", (task.name, data)
        assert weight[:2] == [3, 3]  # HWIO
        channels.append(weight[2])
    assert sorted(channels) == [4, 8]  # the RGB input gets a zero channel: pairs for vdpbf16ps
    pads = [t for n, t in bf16.items() if "pad" in n]
    assert {arg_specs(t.mod["main"])[-1][0][1] for t in pads} == {18}
    # The global pool reads what the ReLU wrote, in float32 (NHWC now).
    pools = [t for n, t in bf16.items() if n.startswith("mean")]
    assert pools and all(dtype == "float32" for _, dtype in arg_specs(pools[0].mod["main"]))


def test_an_unknown_precision_is_refused_by_name(target: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="float16.*one of float32, bfloat16"):
        check_precision("float16")
    with pytest.raises(ModelRejected) as err:
        parse_model("onnx", tiny_cnn().SerializeToString(), TINY, target, precision="fp8")
    assert err.value.field == "precision"


def _logits(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype="float32")


def test_agreement_is_the_lowest_cosine_and_the_same_top_class() -> None:
    rng = np.random.default_rng(0)
    ref = [[rng.standard_normal((4, 32)).astype("f4"), rng.standard_normal((3, 5, 6)).astype("f4")]
           for _ in range(3)]  # fmt: skip
    # bf16's rounding: about 3 significant digits
    close = [[(a * (1 + 4e-3 * rng.standard_normal(a.shape))).astype("f4") for a in outs]
             for outs in ref]  # fmt: skip
    cosine = agreement(ref, close)
    assert MIN_COSINE <= cosine < 1.0
    noisy = [[a + 0.1 * rng.standard_normal(a.shape).astype("f4") for a in outs] for outs in ref]
    with pytest.raises(OutputsDiffer, match="cosine similarity 0.99"):
        agreement(ref, noisy)
    with pytest.raises(OutputsDiffer, match=r"output 0 is \(32, 4\), not \(4, 32\)"):
        agreement(ref, [[a.T for a in outs] for outs in ref])


def test_a_classifier_must_keep_its_top_class_unless_float32_ties_it() -> None:
    # cosines over 0.9999: the only difference is the top class
    ref = [[_logits([50.0, 49.0] + [30.0] * 30)]]
    with pytest.raises(OutputsDiffer, match="row 0: top class 1, float32's is 0"):
        agreement(ref, [[_logits([49.4, 49.6] + [30.0] * 30)]])
    tied = [[_logits([50.0, 49.99] + [30.0] * 30)]]
    assert agreement(tied, [[_logits([49.99, 50.0] + [30.0] * 30)]]) > 0.9999


def _cancelling_model() -> Any:
    """y = x W1 - x W2 with W2 = W1 (1 + 1e-3 noise): float32 keeps the small difference; bf16
    (8 bits of mantissa) rounds most of W1 and W2 to the same values and loses it."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((64, 32)).astype("f4")
    w2 = (w1 * (1 + 1e-3 * rng.standard_normal(w1.shape))).astype("f4")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["a"]),
         helper.make_node("MatMul", ["x", "w2"], ["b"]),
         helper.make_node("Sub", ["a", "b"], ["y"])],
        "cancel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype("f8").ravel(), b.astype("f8").ravel()
    return float(a64 @ b64 / np.linalg.norm(a64) / np.linalg.norm(b64))


def test_a_bf16_compile_is_checked_against_float32_in_the_jail(
    target: dict[str, Any], tmp_path: Path
) -> None:
    from tests.tuning.test_models import _run_artifact

    data = tiny_cnn().SerializeToString()
    compiled = compile_model("onnx", data, TINY, target, [], tmp_path / "out",
                             precision="bfloat16")  # fmt: skip
    assert compiled.tasks == 7  # the input's cast (and pad), and the second conv's pad: tasks
    assert compiled.min_cosine is not None and MIN_COSINE <= compiled.min_cosine <= 1.0
    x = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype("float32")
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    expected = np.asarray(session.run(None, {"x": x})[0])
    got = _run_artifact(compiled.path, x)
    assert got.dtype == np.float32 and got.shape == expected.shape  # as the model declares
    assert _cosine(got, expected) >= MIN_COSINE
    assert np.abs(got - expected).max() > 1e-5  # bf16 operands, not float32 silently


def test_a_model_bf16_breaks_is_refused_and_float32_compiles_it(
    target: dict[str, Any], tmp_path: Path
) -> None:
    data = _cancelling_model().SerializeToString()
    inputs = [ModelInput("x", (4, 64), "float32")]
    with pytest.raises(ModelRejected, match="cosine similarity"):
        compile_model("onnx", data, inputs, target, [], tmp_path / "bf16",
                      precision="bfloat16")  # fmt: skip
    compiled = compile_model("onnx", data, inputs, target, [], tmp_path / "fp32")
    assert compiled.min_cosine is None and compiled.path.stat().st_size > 0


def test_only_one_group_bf16_convs_go_nhwc_and_pad_apart() -> None:
    """`tuning.models.bf16_layout`: the regular conv goes NHWC/HWIO and reads an ``nn.pad``;
    the depthwise conv after it keeps NCHW/OIHW and its own padding (a transform before it)."""
    from tvm import relax
    from tvm.script import relax as R

    from tuning.models.bf16_layout import to_nhwc
    from tuning.models.precision import to_bfloat16

    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((1, 16, 8, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            regular = np.ones((16, 16, 3, 3), "float32")
            depthwise = np.ones((16, 1, 3, 3), "float32")
            a = bb.emit(relax.op.nn.conv2d(x, relax.const(regular), padding=1))
            b = bb.emit(relax.op.nn.conv2d(a, relax.const(depthwise), padding=1, groups=16))
            out = bb.emit_output(relax.op.nn.relu(b))
        bb.emit_func_output(out)
    mod = to_nhwc(to_bfloat16(bb.get()))
    calls = [
        binding.value
        for block in mod["main"].body.blocks
        for binding in block.bindings
        if isinstance(binding.value, relax.Call)
    ]
    convs = {
        int(c.attrs.groups): (str(c.attrs.data_layout), str(c.attrs.kernel_layout),
                              [int(p) for p in c.attrs.padding])
        for c in calls
        if getattr(c.op, "name", "") == "relax.nn.conv2d"
    }  # fmt: skip
    assert convs == {1: ("NHWC", "HWIO", [0, 0, 0, 0]), 16: ("NCHW", "OIHW", [1, 1, 1, 1])}
    pads = [c for c in calls if getattr(c.op, "name", "") == "relax.nn.pad"]
    assert len(pads) == 1 and [int(w) for w in pads[0].attrs.pad_width] == [0, 0, 1, 1, 1, 1, 0, 0]


def test_asymmetric_padding_and_odd_channels_compute_the_same_convolution() -> None:
    """A conv padded (top 0, left 1, bottom 2, right 3) on 3 channels, rewritten NHWC with its
    padding (and a zero fourth channel) apart, gives what the bf16 NCHW conv gives."""
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    from tuning.models.bf16_layout import to_nhwc
    from tuning.models.precision import to_bfloat16

    rng = np.random.default_rng(4)
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((1, 3, 6, 5), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            weight = relax.const(rng.standard_normal((16, 3, 3, 3)).astype("float32"))
            out = bb.emit_output(relax.op.nn.conv2d(x, weight, padding=(0, 1, 2, 3)))
        bb.emit_func_output(out)
    plain = to_bfloat16(bb.get())
    rewritten = to_nhwc(plain)
    pads = [int(w) for w in _calls(rewritten, "relax.nn.pad")[0].attrs.pad_width]
    assert pads == [0, 0, 0, 2, 1, 3, 0, 1]
    data = tvm.runtime.tensor(rng.standard_normal((1, 3, 6, 5)).astype("float32"))
    got = []
    for mod in (plain, rewritten):
        vm = relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())
        got.append(vm["main"](data).numpy())
    assert got[0].shape == got[1].shape == (1, 16, 6, 7)
    np.testing.assert_allclose(got[1], got[0], rtol=1e-5, atol=1e-5)


def _calls(mod: Any, name: str) -> list[Any]:
    from tvm import relax

    return [
        binding.value
        for block in mod["main"].body.blocks
        for binding in block.bindings
        if isinstance(binding.value, relax.Call) and getattr(binding.value.op, "name", "") == name
    ]
