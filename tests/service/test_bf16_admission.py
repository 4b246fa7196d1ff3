"""bf16 work over the real API (issue 39): an operator in ``bfloat16``, a model with
``precision: bfloat16``, raw TIR with a bf16 buffer and a bf16 build's missing tasks reach only
a target with a bf16 unit (AVX512-BF16 or AMX-BF16); elsewhere a 422 ``missing_cpu_feature``
at the field that asked, and nothing recorded. Targets are declared by their mcpu, so these
hold on any host."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.service.rows import WRITTEN_BY_JOBS, row_counts
from tests.service.test_api import _body, api

__all__ = ["api"]  # the module-scoped server fixture, one of this module's own


@pytest.mark.parametrize(
    ("mcpu", "accepted"),
    [("skylake-avx512", False), ("rocketlake", False), ("znver4", True), ("sapphirerapids", True)],
)
def test_bfloat16_needs_a_target_with_a_bf16_unit(
    api: tuple[httpx.Client, Path], mcpu: str, accepted: bool
) -> None:
    """Issue 39: a bf16 kernel only where AVX512-BF16 or AMX-BF16 can run it; elsewhere a 422
    naming the dtype and the missing feature, and nothing recorded."""
    client, data_dir = api
    target = {"kind": "llvm", "mcpu": mcpu, "num-cores": 2}
    params = {"M": 8, "N": 32, "K": 16, "dtype": "bfloat16"}
    before = row_counts(data_dir)
    response = client.post("/jobs", json=_body(params, target=target, trials=4, name="dense"))
    if accepted:
        assert response.status_code == 201, response.text
        assert response.json()["operator"]["params"]["dtype"] == "bfloat16"
        return
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "operator", "params", "dtype"]
    assert detail["type"] == "missing_cpu_feature" and "AVX512-BF16" in detail["msg"]
    assert row_counts(data_dir) == before
    # The same operator in float32 is taken on that target.
    fp32 = client.post("/jobs", json=_body({**params, "dtype": "float32"}, target=target))
    assert fp32.status_code == 201, fp32.text


def _model_body(precision: str, target: object) -> dict:
    import base64

    from tests.tuning.model_cases import tiny_cnn

    source = base64.b64encode(tiny_cnn().SerializeToString()).decode()
    return {"name": "tiny", "format": "onnx", "source": source, "target": target, "trials": 8,
            "inputs": [{"name": "x", "shape": [1, 3, 16, 16], "dtype": "float32"}],
            "precision": precision}  # fmt: skip


@pytest.mark.parametrize(("mcpu", "accepted"), [("rocketlake", False), ("sapphirerapids", True)])
def test_a_bfloat16_model_needs_a_bf16_unit_and_tunes_tasks_of_its_own(
    api: tuple[httpx.Client, Path], mcpu: str, accepted: bool
) -> None:
    """Issue 39, item 5: ``precision: bfloat16`` on a model is a 422 at ``precision`` where the
    target has no bf16 unit (nothing recorded); elsewhere its contractions are bf16 workloads,
    other than the float32 model's (NHWC, their padding a task apart), and the model says its
    precision."""
    client, data_dir = api
    target = {"kind": "llvm", "mcpu": mcpu, "num-cores": 2}
    tables = (*WRITTEN_BY_JOBS, "models", "model_tasks")
    before = row_counts(data_dir, tables)
    response = client.post("/models", json=_model_body("bfloat16", target), timeout=300)
    if not accepted:
        assert response.status_code == 422, response.text
        (detail,) = response.json()["detail"]
        assert detail["loc"] == ["body", "precision"]
        assert detail["type"] == "missing_cpu_feature" and "AVX512-BF16" in detail["msg"]
        assert row_counts(data_dir, tables) == before
        return
    assert response.status_code == 201, response.text
    bf16 = response.json()
    assert bf16["precision"] == "bfloat16" and bf16["state"] == "tuning"
    fp32 = client.post("/models", json=_model_body("float32", target), timeout=300)
    assert fp32.status_code == 201, fp32.text
    assert fp32.json()["precision"] == "float32"
    names = {
        model["id"]: {
            t["name"]: t["workload_id"]
            for t in client.get(f"/models/{model['id']}").json()["tasks"]
        }
        for model in (bf16, fp32.json())
    }
    bf16_tasks, fp32_tasks = names[bf16["id"]], names[fp32.json()["id"]]
    convs = [name for name in bf16_tasks if "conv2d" in name]
    assert convs and not {bf16_tasks[n] for n in convs} & set(fp32_tasks.values())
    # on CPU a bf16 model's convs are NHWC and read their input padded by a task of its own
    assert any("pad" in name for name in bf16_tasks) and not any("pad" in n for n in fp32_tasks)
    for model in (bf16, fp32.json()):
        assert client.post(f"/models/{model['id']}/cancel").status_code == 200


BF16_TIR = """@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16,), "bfloat16"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                v_i = T.axis.spatial(16, i)
                B[v_i] = T.Cast("float32", A[v_i]) * T.float32(2.0)
"""


def _bf16_task() -> dict:
    """The tiny CNN's second conv in bf16, as a build sends a task it found no schedule for."""
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    from tests.tuning.model_cases import tiny_cnn
    from tuning.hardware.targets import resolve_target
    from tuning.models.pipeline import extract, tuning_pipeline

    mod = from_onnx(tiny_cnn(), shape_dict={"x": [1, 3, 16, 16]}, keep_params_in_input=False)
    target = tvm.target.Target(resolve_target("host").canonical)
    tasks = extract(tuning_pipeline(mod, target, precision="bfloat16"), target)
    task = next(t for t in tasks if t.name.startswith("fused_conv2d1"))
    return {"name": task.name, "module": tvm.ir.save_json(task.mod)}


@pytest.mark.parametrize(("mcpu", "accepted"), [("rocketlake", False), ("sapphirerapids", True)])
def test_raw_tir_and_uploaded_tasks_in_bf16_need_a_bf16_unit_too(
    api: tuple[httpx.Client, Path], mcpu: str, accepted: bool
) -> None:
    """Issue 39: bf16 work reaches no target without a bf16 unit by another door: raw TIR with a
    bf16 buffer (422 at ``tir``) and a bf16 build's missing tasks (422 at ``tasks.N``)."""
    client, data_dir = api
    target = {"kind": "llvm", "mcpu": mcpu, "num-cores": 2}
    before = row_counts(data_dir)
    tir = {"tir": {"format": "tvmscript", "source": BF16_TIR}, "target": target, "trials": 2}
    upload = {"target": target, "tasks": [_bf16_task()]}
    responses = [client.post("/jobs", json=tir, timeout=300),
                 client.post("/tasks", json=upload, timeout=300)]  # fmt: skip
    if accepted:
        assert [r.status_code for r in responses] == [201, 200], [r.text for r in responses]
        for job_id in [
            responses[0].json()["id"],
            *[t["job_id"] for t in responses[1].json()["tasks"]],
        ]:
            client.post(f"/jobs/{job_id}/cancel")
        return
    for response, loc in zip(responses, (["body", "tir"], ["body", "tasks", 0]), strict=True):
        assert response.status_code == 422, response.text
        (detail,) = response.json()["detail"]
        assert detail["loc"] == loc and detail["type"] == "missing_cpu_feature", detail
    assert row_counts(data_dir) == before
