"""A whole model in the blocked channel layout (issue 38) over the real API and a real worker
(in process): ``layout: blocked`` tunes the convolutions in NCHW[x]c, compiles the model with
them, and a build with the same layout fetches the same tasks; every output equals
onnxruntime's."""

from __future__ import annotations

from typing import Any

import numpy as np

from service.client import TunehubClient
from service.client.relax_build import build
from service.client.tvm_database import TunehubDatabase
from tests.service.test_model_jobs import (
    INPUT,
    Service,
    _body,
    _onnx_output,
    _run_compiled,
    service,
)
from tuning.hardware.targets import resolve_target
from tuning.models.pipeline import tuning_pipeline

__all__ = ["service"]  # the module-scoped server fixture, one of this module's own


def _blocked_cnn() -> Any:
    """conv3x3(3->16)+ReLU, conv3x3(16->16)+bias+residual+ReLU, global pool, dense(16->10) on
    the 1x3x16x16 input "x": channels that divide into any vector's blocks (4, 8 or 16)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)

    def init(name: str, *shape: int) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype("f4"), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    inits = [init("w1", 16, 3, 3, 3), init("w2", 16, 16, 3, 3), init("b2", 16),
             init("w3", 10, 16), init("b3", 10)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "blocked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def test_a_blocked_model_is_tuned_in_its_layout_and_built_with_it(service: Service) -> None:
    """Its convolutions are other workloads than the plain layout's."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    model = _blocked_cnn()
    created = service.client.post("/api/v1/models", json=_body(model, trials=12,
                                                                 layout="blocked"))  # fmt: skip
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["layout"] == "blocked"
    names = {t["name"] for t in body["tasks"]}
    assert any("conv2d_NCHWc" in n and "add" in n and "relu" in n for n in names), names
    outcomes = service.run_worker("pytest-blocked")
    assert outcomes and set(outcomes) == {"succeeded"}, outcomes
    done = service.client.get(f"/api/v1/models/{body['id']}").json()
    assert done["state"] == "succeeded" and done["layout"] == "blocked", done
    assert done["result"]["tasks_applied"] >= 1

    x = np.random.default_rng(4).standard_normal((1, 3, 16, 16)).astype("float32")
    expected = _onnx_output(model, x)
    compiled = service.client.get(f"/api/v1/models/{body['id']}/artifact")
    path = service.data_dir / "blocked-model.so"
    path.write_bytes(compiled.content)
    np.testing.assert_allclose(_run_compiled(path, x), expected, rtol=1e-4, atol=1e-5)

    mod = from_onnx(model, shape_dict={"x": INPUT[0]["shape"]})
    target = tvm.target.Target(resolve_target("host").canonical)
    with TunehubClient(service.url) as client:
        blocked = tuning_pipeline(mod, target, layout="blocked")
        found = TunehubDatabase(client, target).prefetch(blocked)
        assert found == done["result"]["tasks_applied"]
        # The plain layout shares the tasks no block changes (the 3-channel conv, the dense),
        # not the blocked convs.
        assert TunehubDatabase(client, target).prefetch(tuning_pipeline(mod, target)) < found
        executable = build(mod, target, client=client, layout="blocked")
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
