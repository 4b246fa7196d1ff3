"""Whole models through the real jail and real TVM: tasks extracted in isolation (and equal to
an in-process extraction), hostile models refused with a reason, the output directory a child
may write, and compiled models that load in a fresh VM and compute what onnxruntime does, with
and without a tuned schedule applied."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
import tvm
from tvm import relax

from tests.tuning.escapes import report_of, reporting
from tests.tuning.model_cases import (
    TINY_RELAX,
    external_data,
    huge_initializer,
    relax_calling,
    tiny_cnn,
)
from tuning.hardware.host import host_target_spec
from tuning.ir import structural_hash
from tuning.jail import Limits
from tuning.models.frontends import relax_module
from tuning.models.inputs import ModelInput
from tuning.models.pipeline import ExtractedTask, extract, tuning_pipeline
from tuning.untrusted.ask import ask
from tuning.untrusted.user_model import (
    ModelRejected,
    check_relax_syntax,
    compile_model,
    parse_model,
)

TINY = [ModelInput("x", (1, 3, 16, 16), "float32")]
RELAX_INPUTS = [ModelInput("x", (4, 16), "float32"), ModelInput("w", (16, 8), "float32")]


@pytest.fixture(scope="module")
def target() -> dict[str, Any]:
    return host_target_spec()


@pytest.fixture(scope="module")
def local_tasks(target: dict[str, Any]) -> list[ExtractedTask]:
    """The tiny CNN's tasks extracted in this process (trusted: the test's own model)."""
    mod = relax_module("onnx", tiny_cnn().SerializeToString(), TINY)
    tvm_target = tvm.target.Target(target)
    return extract(tuning_pipeline(mod, tvm_target), tvm_target)


def test_tiny_cnn_tasks_extracted_in_the_jail_match_an_in_process_extraction(
    target: dict[str, Any], local_tasks: list[ExtractedTask]
) -> None:
    parsed = parse_model("onnx", tiny_cnn().SerializeToString(), TINY, target)
    got = {t.name: t for t in parsed.tasks}
    assert sorted(got) == sorted(t.name for t in local_tasks) and len(got) == 5
    for task in local_tasks:
        assert got[task.name].shash == structural_hash(task.mod)
        assert got[task.name].layout_free == task.layout_free
        assert got[task.name].weight == task.weight == 1
    convs = [t for t in parsed.tasks if "conv2d" in t.name]
    assert len(convs) == 2 and all(t.layout_free == (1, 2) and t.flop > 0 for t in convs)
    assert [(o.shape, o.dtype) for o in parsed.outputs] == [((1, 10), "float32")]
    assert parsed.untunable == []


def test_a_relax_tvmscript_model_is_parsed_into_its_tasks(target: dict[str, Any]) -> None:
    parsed = parse_model("relax", TINY_RELAX.encode(), RELAX_INPUTS, target)
    assert [t.name for t in parsed.tasks] == ["fused_matmul_relu1"]
    assert parsed.tasks[0].layout_free == ()  # w is an input, not a bound weight
    assert [(o.shape, o.dtype) for o in parsed.outputs] == [((4, 8), "float32")]


def test_a_forged_first_answer_is_caught_by_the_second_child(
    target: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first child that lies about a task's hash (as one the model took over could) is
    caught: the second child re-derives every task from its JSON and must agree."""
    real = ask

    def lying(task: str, payload: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        answer = real(task, payload, *args, **kwargs)
        if task == "model_tasks":
            answer["tasks"][0]["shash"] = "1234"
        return answer

    monkeypatch.setattr("tuning.untrusted.user_model.ask", lying)
    with pytest.raises(ModelRejected, match="does not re-derive to the same function"):
        parse_model("onnx", tiny_cnn().SerializeToString(), TINY, target)


@pytest.mark.parametrize(
    ("inputs", "reason"),
    [
        ([], "1 to 16 inputs"),
        ([ModelInput("x", (1, 0, 16, 16), "float32")], "every dim must be an integer"),
        ([ModelInput("x", (1, 3, 16, 16), "complex64")], "dtype must be one of"),
        ([ModelInput("x", (1 << 20, 1 << 20), "float32")], "elements, over"),
        ([ModelInput("x", (1,), "int8")] * 2, "given twice"),
        ([ModelInput("x;rm", (1,), "int8")], "name must match"),
    ],
)
def test_declared_inputs_out_of_bounds_are_refused_before_any_child(
    inputs: list[ModelInput], reason: str, target: dict[str, Any]
) -> None:
    with pytest.raises(ModelRejected, match=reason) as refused:
        parse_model("onnx", tiny_cnn().SerializeToString(), inputs, target)
    assert refused.value.field == "inputs"


def _onnx_refusal(data: bytes, target: dict[str, Any], inputs: list[ModelInput] = TINY) -> Any:
    with pytest.raises(ModelRejected) as refused:
        parse_model("onnx", data, inputs, target)
    return refused.value


def test_hostile_onnx_files_are_refused_with_a_reason(target: dict[str, Any]) -> None:
    cnn = tiny_cnn().SerializeToString()
    assert "not an ONNX model" in str(_onnx_refusal(cnn[: len(cnn) // 2], target))
    refused = _onnx_refusal(huge_initializer().SerializeToString(), target)
    assert "initializer 'big' declares 10000000000 bytes" in str(refused)
    assert refused.field == "source"
    assert "refers to external data" in str(
        _onnx_refusal(external_data().SerializeToString(), target)
    )
    wrong_name = _onnx_refusal(cnn, target, [ModelInput("image", (1, 3, 16, 16), "float32")])
    assert wrong_name.field == "inputs" and "['x']" in str(wrong_name)
    wrong_dim = _onnx_refusal(cnn, target, [ModelInput("x", (1, 3, 32, 16), "float32")])
    assert wrong_dim.field == "inputs" and "dim 16 at axis 2" in str(wrong_dim)
    unknown = tiny_cnn()
    unknown.graph.node[1].op_type = "NoSuchOperator"
    refused = _onnx_refusal(unknown.SerializeToString(), target)
    assert "TVM cannot import this ONNX model" in str(refused) or "NoSuchOperator" in str(refused)


def _relax_with_weights() -> str:
    """A Relax module with a bound weight, printed as TVM prints it: the weight in a
    ``metadata = tvm.ir.load_json(...)`` statement before the class."""
    import numpy as np
    from tvm import relax
    from tvm.script import relax as R

    builder = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((4, 16), "float32"))
    with builder.function("main", [x]):
        weight = relax.const(np.random.default_rng(0).standard_normal((16, 8)).astype("float32"))
        y = builder.emit(relax.op.nn.relu(relax.op.matmul(x, weight)))
        builder.emit_func_output(y)
    text: str = builder.get().script(show_meta=True)
    assert text.startswith("metadata = tvm.ir.load_json(")
    return text


def test_a_relax_model_with_its_weights_in_metadata_is_parsed(target: dict[str, Any]) -> None:
    parsed = parse_model("relax", _relax_with_weights(), RELAX_INPUTS[:1], target)
    layout_free = {task.name: task.layout_free for task in parsed.tasks}
    assert layout_free == {"matmul1": (1,), "relu1": ()}  # the bound weight is layout-free
    assert [(o.shape, o.dtype) for o in parsed.outputs] == [((4, 8), "float32")]


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ('metadata = tvm.ir.load_json(open("/etc/passwd").read())', "only an @I.ir_module"),
        ('metadata = tvm.get_global_func("system")', "only an @I.ir_module"),
        ('metadata = tvm.ir.load_json("{}", 1)', "only an @I.ir_module"),
        ('other = tvm.ir.load_json("{}")', "only an @I.ir_module"),
        ('metadata = tvm.ir.load_json("{}")\nmetadata = tvm.ir.load_json("{}")', "at most"),
    ],
)
def test_only_the_metadata_statement_tvm_prints_is_let_through(statement: str, reason: str) -> None:
    text = _relax_with_weights()
    first, _, rest = text.partition('""")\n')
    with pytest.raises(ModelRejected, match=reason):
        check_relax_syntax(statement + "\n" + rest)
    assert first  # the statement TVM printed is replaced, the class kept


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (
            'R.call_packed("system", x, ty_args=R.Tensor((4, 16), "float32"))',
            "extern function 'system' is not allowed",
        ),  # fmt: skip
        (
            'R.call_pure_packed("system", x, ty_args=R.Tensor((4, 16), "float32"))',
            "extern function 'system' is not allowed",
        ),  # fmt: skip
        ('R.print(x, format="{}")', "relax.print is not allowed"),
        ('__import__("os").system("true")', "'__import__' is not allowed"),
        ('open("/etc/passwd")', "'open' is not allowed"),
        ('getattr(x, "shape")', "'getattr' is not allowed"),
    ],
)
def test_hostile_relax_is_refused(call: str, reason: str, target: dict[str, Any]) -> None:
    with pytest.raises(ModelRejected, match=reason):
        parse_model("relax", relax_calling(call), RELAX_INPUTS, target)


def test_the_jail_refuses_what_the_syntax_filter_lets_through(
    target: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the parent's filter off, the child still refuses a PrimFunc that writes out of
    bounds and a Relax call of something other than the module's functions."""
    monkeypatch.setattr("tuning.untrusted.user_model.check_relax_syntax", lambda text: text)
    out_of_bounds = """
@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def shift(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32")):
        for i, j in T.grid(4, 16):
            with T.sblock("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj + 1] = A[vi, vj]

    @R.function
    def main(x: R.Tensor((4, 16), "float32"), w: R.Tensor((16, 8), "float32")):
        cls = Module
        y = R.call_tir(cls.shift, (x,), out_ty=R.Tensor((4, 16), "float32"))
        return y
"""
    with pytest.raises(ModelRejected, match="PrimFunc shift"):
        parse_model("relax", out_of_bounds, RELAX_INPUTS, target)


def test_a_child_writes_only_its_named_output_files(tmp_path: Path) -> None:
    """The child sees ``/out`` with its one file and a private ``/tmp``: it can write both (up
    to their limits) but add, remove or replace nothing in ``/out``; afterwards the file is
    the parent's again, a plain 0644 file."""
    code = r"""
import os
def attempt(name, fn):
    try:
        fn()
        results[name] = "succeeded"
    except BaseException as err:
        results[name] = type(err).__name__
def write(path, size=5):
    with open(path, "wb") as f:
        f.write(b"x" * size)
attempt("overfill_output", lambda: write("/out/model.so", 2 << 20))
attempt("write_output", lambda: write("/out/model.so"))
attempt("setuid_output", lambda: os.chmod("/out/model.so", 0o4755))
attempt("add_file", lambda: write("/out/other"))
attempt("unlink_output", lambda: os.unlink("/out/model.so"))
attempt("symlink", lambda: os.symlink("/etc/shadow", "/out/link"))
attempt("write_tmp", lambda: write("/tmp/scratch"))
attempt("overfill_tmp", lambda: write("/tmp/big", 3 << 20))
"""
    out = tmp_path / "out"
    limits = Limits(file_size=1 << 20, tmp_bytes=2 << 20)
    answer = ask("parse", {"format": "tvmscript", "source": reporting(code)}, limits,
                          output_dir=out, output_files=("model.so",))  # fmt: skip
    results = report_of(answer["error"])
    assert results == {
        "overfill_output": results["overfill_output"],
        "write_output": "succeeded",
        "setuid_output": "succeeded",
        "add_file": "PermissionError",
        "unlink_output": "PermissionError",
        "symlink": "PermissionError",
        "write_tmp": "succeeded",
        "overfill_tmp": results["overfill_tmp"],
    }
    # The file size limit (SIGXFSZ is ignored in the child: the write fails), or the tmpfs's.
    assert "succeeded" not in (results["overfill_output"], results["overfill_tmp"])
    assert sorted(p.name for p in out.iterdir()) == ["model.so"]
    info = (out / "model.so").stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode), info.st_size) == (os.geteuid(), 0o644, 5)


def _run_artifact(path: Path, x: np.ndarray) -> np.ndarray:
    """The exported library's ``main`` on ``x``, in a fresh VM: the weights are folded into
    the library, so ``main`` takes the input alone (no ``main_transform_params`` call)."""
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(path)), tvm.cpu())
    return np.asarray(vm["main"](tvm.runtime.tensor(x)).numpy())


def _onnxruntime(x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(
        tiny_cnn().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return np.asarray(session.run(None, {"x": x})[0])


def test_an_untuned_compile_loads_and_matches_onnxruntime(
    target: dict[str, Any], tmp_path: Path
) -> None:
    compiled = compile_model(
        "onnx", tiny_cnn().SerializeToString(), TINY, target, [], tmp_path / "out"
    )
    assert (compiled.applied, compiled.tasks, compiled.skipped) == (0, 5, 0)
    assert compiled.max_abs_error == 0.0 and compiled.untuned_ms > 0 and compiled.tuned_ms > 0
    x = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype("float32")
    np.testing.assert_allclose(_run_artifact(compiled.path, x), _onnxruntime(x), rtol=1e-4,
                               atol=1e-5)  # fmt: skip


def _sampled_record(task: ExtractedTask, target: dict[str, Any]) -> dict[str, Any]:
    """One schedule of the packed space for ``task`` (design space sampled, postprocessors
    applied: what the search measures), in the store's record form. Its run time is made up:
    measuring would cost minutes, and what is tested is that the schedule is applied."""
    from tvm.s_tir.meta_schedule import TuneContext, _ffi_api
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    from tuning.search.spaces import PACKED, space_generator
    from tuning.traces import plain_json, trace_to_text

    tvm_target = tvm.target.Target(target)
    context = TuneContext(
        mod=task.mod,
        target=tvm_target,
        space_generator=space_generator(PACKED, tvm_target, task.mod),
        search_strategy="replay-trace",
        rand_state=3,
        num_threads=1,
    ).clone()
    context.pre_tuning(max_trials=2, num_trials_per_iter=2,
                       design_spaces=context.generate_design_space(), database=None,
                       cost_model=None)  # fmt: skip
    candidate = context.search_strategy.generate_measure_candidates()[0]
    context.post_tuning()
    record = TuningRecord(candidate.sch.trace, Workload(task.mod), [1e-5], tvm_target,
                          candidate.args_info)  # fmt: skip
    raw_trace, _, _, raw_args = _ffi_api.TuningRecordAsJSON(record)
    assert "layout" in str(candidate.sch.trace)  # the weight is repacked: the packed path
    return {"shash": structural_hash(task.mod), "trace_json": trace_to_text(raw_trace),
            "run_secs": [1e-5], "args_info": plain_json(raw_args)}  # fmt: skip


def test_a_tuned_compile_applies_its_record_and_still_matches_onnxruntime(
    target: dict[str, Any], local_tasks: list[ExtractedTask], tmp_path: Path
) -> None:
    conv = next(t for t in local_tasks if t.name == "fused_conv2d1_add_relu1")
    record = _sampled_record(conv, target)
    other = next(t for t in local_tasks if t.name == "mean1")
    broken = {**record, "shash": structural_hash(other.mod)}  # a trace of another function
    unknown = {**record, "shash": "12345"}  # no task of this model
    compiled = compile_model("onnx", tiny_cnn().SerializeToString(), TINY, target,
                             [record, broken, unknown], tmp_path / "out")  # fmt: skip
    assert (compiled.applied, compiled.skipped, compiled.tasks) == (1, 1, 5)
    assert compiled.max_abs_error < 1e-3
    x = np.random.default_rng(8).standard_normal((1, 3, 16, 16)).astype("float32")
    np.testing.assert_allclose(_run_artifact(compiled.path, x), _onnxruntime(x), rtol=1e-4,
                               atol=1e-5)  # fmt: skip
    assert json.loads(record["trace_json"])  # the store's text form replayed in the child
