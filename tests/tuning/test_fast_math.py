"""Fast math in the model pipeline (issue 26): exp, erf, tanh and softmax become TOPI's
vectorising polynomials before tasks are extracted; a model compiled that way agrees with the
exact build and with onnxruntime, and a model whose output fast math moves beyond tolerance
(an exp near the largest float32, where the approximation overflows to inf) is refused
by the compile, in the jail, with the reason."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from tuning.hardware.host import host_target_spec
from tuning.models.frontends import relax_module
from tuning.models.inputs import ModelInput
from tuning.models.pipeline import compile_with, tuning_pipeline
from tuning.untrusted.user_model import ModelRejected, compile_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from transformer_block import encoder_layer  # noqa: E402

LAYER = [ModelInput("x", (1, 16, 64), "float32")]


def _primfunc_text(fused: Any) -> str:
    return "\n".join(
        f.script() for _, f in fused.functions.items() if isinstance(f, tvm.tirx.PrimFunc)
    )


def _run(fused: Any, target: Any, x: np.ndarray) -> np.ndarray:
    executable = compile_with(fused, target, ms.database.MemoryDatabase())
    vm = relax.VirtualMachine(executable, tvm.cpu())
    return np.asarray(vm["main"](tvm.runtime.tensor(x)).numpy())


def test_the_pipeline_tunes_polynomials_and_agrees_with_the_exact_build() -> None:
    model = encoder_layer()  # GELU (erf) and softmax (exp): seq 16, width 64, 4 heads
    target = tvm.target.Target(host_target_spec())
    mod = relax_module("onnx", model.SerializeToString(), LAYER)
    fast, exact = tuning_pipeline(mod, target), tuning_pipeline(mod, target, fast_math=False)
    assert "T.erf(" in _primfunc_text(exact) and "T.exp(" in _primfunc_text(exact)
    assert "T.erf(" not in _primfunc_text(fast) and "T.exp(" not in _primfunc_text(fast)
    x = np.random.default_rng(0).standard_normal((1, 16, 64)).astype("float32")
    got, want = _run(fast, target, x), _run(exact, target, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    session = onnxruntime.InferenceSession(model.SerializeToString())
    np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


def _exp_near_its_limit() -> bytes:
    """y = exp(x / 100 + 88.5) on standard normal x: about 2.7e38, still finite in float32;
    fast_exp overflows there (inf: its exponent passes 127 before its polynomial brings it
    back)."""
    scale = numpy_helper.from_array(np.array(0.01, dtype=np.float32), "scale")
    shift = numpy_helper.from_array(np.array(88.5, dtype=np.float32), "shift")
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "scale"], ["m"]),
            helper.make_node("Add", ["m", "shift"], ["a"]),
            helper.make_node("Exp", ["a"], ["y"]),
        ],
        "overflow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [scale, shift],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return bytes(model.SerializeToString())


def test_a_model_fast_math_moves_beyond_tolerance_is_refused(tmp_path: Path) -> None:
    inputs = [ModelInput("x", (4, 16), "float32")]
    with pytest.raises(ModelRejected, match="fast math or the layout moved the model's output"):
        compile_model("onnx", _exp_near_its_limit(), inputs, host_target_spec(), [], tmp_path / "o")
