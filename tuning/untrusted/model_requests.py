"""The isolated child's tasks on a user's model: import it and extract its tuning tasks,
re-derive tasks from their JSON (the model's, or those a build sends), and compile it with
tuned schedules (writing ``/out``).

They run the ONNX importer, the TVMScript parser and TVM's compiler on user input, so they
run only inside the jail (`tuning.untrusted.user_model` is the parent's side). A refusal's
message starts with the request field it concerns ("source: …" or "inputs: …").
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuning.checks.library_check import export_library
from tuning.checks.trace_gate import check_trace_text
from tuning.hardware.bf16 import register_named_intrinsics
from tuning.ir import layout_free_operands, structural_hash
from tuning.models.blocked_layout import LAYOUTS, PLAIN
from tuning.models.frontends import ModelRefused, relax_module
from tuning.models.inputs import InvalidInputs, inputs_from_json
from tuning.models.pipeline import TaskRecord, compile_with, database_of, extract, tuning_pipeline
from tuning.models.precision import FLOAT32, PRECISIONS
from tuning.models.run import (
    AGREEMENT_INPUTS,
    ATOL,
    BF16_ATOL,
    BF16_RTOL,
    RTOL,
    OutputsDiffer,
    agreement,
    max_abs_error,
    outputs_on,
    random_inputs,
    run_library,
)
from tuning.untrusted.workloads import Refused, checked_module, derive, describe

MAX_TASKS = 500
OUTPUT_FILE = "model.so"
OUT_DIR = Path("/out")
BUILD_DIR = Path("/tmp/tunehub-build")


def _refused(field: str, message: str) -> Refused:
    return Refused(f"{field}: {message}")


def _imported(format: str, source: str, inputs: Any, target: Any) -> tuple[Any, Any, list[Any]]:  # noqa: A002
    """(Relax module, target, inputs) of a request, or `Refused` naming the field."""
    import tvm

    try:
        given = inputs_from_json(inputs)
    except InvalidInputs as err:
        raise _refused("inputs", str(err)) from None
    if not isinstance(source, str):
        raise _refused("source", "the model must be sent as text")
    data: bytes | str = source
    if format == "onnx":
        try:
            data = base64.b64decode(source, validate=True)
        except (binascii.Error, ValueError):
            raise _refused("source", "an ONNX model is sent base64-encoded") from None
    try:
        target = tvm.target.Target(target)
    except Exception as err:  # noqa: BLE001 - the service's own target, but checked anyway
        raise _refused("target", f"not a target: {err}"[:300]) from None
    try:
        mod = relax_module(format, data, given)
    except ModelRefused as err:
        raise _refused(err.field, str(err)) from None
    return mod, target, given


def _fused(
    mod: Any, target: Any, layout: str, fast_math: bool = True, precision: str = FLOAT32
) -> Any:
    """The imported ``mod`` through the tuning pipeline in ``layout`` and ``precision``, or
    `Refused` naming the source (or the layout, or the precision)."""
    if layout not in LAYOUTS:
        raise _refused("layout", f"one of {', '.join(LAYOUTS)}")
    if precision not in PRECISIONS:
        raise _refused("precision", f"one of {', '.join(PRECISIONS)}")
    try:
        return tuning_pipeline(mod, target, fast_math, layout=layout, precision=precision)
    except Exception as err:  # noqa: BLE001 - a shape error, an operator TVM cannot lower …
        lines = [line for line in str(err).splitlines() if line.strip()]
        raise _refused("source", f"TVM cannot lower this model: {type(err).__name__}: "
                       f"{lines[-1] if lines else ''}"[:500]) from None  # fmt: skip


def _model(
    format: str, source: str, inputs: Any, target: Any, layout: str, precision: str
) -> tuple[Any, Any, list[Any]]:  # noqa: A002,E501
    """(fused module, target, inputs) of a request, or `Refused` naming the field."""
    mod, target, given = _imported(format, source, inputs, target)
    return _fused(mod, target, layout, precision=precision), target, given


def _outputs(fused: Any) -> list[dict[str, Any]]:
    """Shape and dtype of every output of ``main`` (a tensor or a tuple of tensors)."""
    from tvm import relax

    info = fused["main"].ret_ty
    fields = info.fields if isinstance(info, relax.TupleType) else [info]
    outputs = []
    for field in fields:
        shape = getattr(field, "shape", None)
        values = getattr(shape, "values", None)
        if not isinstance(field, relax.TensorType) or values is None:
            raise _refused("source", "main must return a tensor or a tuple of tensors")
        if not all(hasattr(d, "value") for d in values):
            raise _refused("source", "main's outputs must have static shapes")
        outputs.append({"shape": [int(d.value) for d in values], "dtype": str(field.dtype)})
    return outputs


def model_tasks(
    format: str,  # noqa: A002
    source: str,
    inputs: Any,
    target: Any,
    layout: str = PLAIN,
    precision: str = FLOAT32,
) -> dict[str, Any]:
    """The model's tuning tasks in ``layout`` and ``precision`` (each a checked workload, with
    its name, weight and layout-free operands), the tasks left out (failing a check: built as
    TVM writes them) and main's outputs."""

    fused, target, _ = _model(format, source, inputs, target, layout, precision)
    outputs = _outputs(fused)
    found = extract(fused, target)
    if len(found) > MAX_TASKS:
        raise _refused("source", f"the model has {len(found)} tuning tasks, over {MAX_TASKS}")
    tasks, untunable = [], []
    for task in found:
        try:
            described = describe(checked_module(task.mod))
        except Refused as err:
            untunable.append({"name": task.name, "reason": str(err)[:300]})
            continue
        tasks.append({"name": task.name, "weight": task.weight, **described,
                      "layout_free": list(task.layout_free)})  # fmt: skip
    return {"tasks": tasks, "untunable": untunable, "outputs": outputs}


def derive_many(mod_jsons: list[str]) -> dict[str, Any]:
    """`derive` of every module JSON (a model's tasks, checked by one child)."""
    if not isinstance(mod_jsons, list) or len(mod_jsons) > MAX_TASKS:
        raise Refused(f"expected a list of at most {MAX_TASKS} module JSON texts")
    tasks = []
    for index, mod_json in enumerate(mod_jsons):
        try:
            tasks.append(derive(mod_json))
        except Exception as err:  # noqa: BLE001 - name the task that fails
            raise Refused(f"task {index}: {type(err).__name__}: {err}"[:1000]) from None
    return {"tasks": tasks}


def uploaded_tasks(tasks: list[Any]) -> dict[str, Any]:
    """A build's tasks as it sent them (``{"name", "module"}``: each the one-function module
    MetaSchedule queries, as TVM JSON) → each checked workload with its name and the operands
    its module marks layout-free; the second child runs it again on the first's answers."""
    import tvm

    if not isinstance(tasks, list) or len(tasks) > MAX_TASKS:
        raise Refused(f"expected a list of at most {MAX_TASKS} tasks")
    answers = []
    for index, task in enumerate(tasks):
        try:
            problem = _graph_problem(json.loads(task["module"]))
            if problem is not None:
                raise Refused(
                    f"task {index}: its module is not TVM JSON as tvm.ir.save_json writes it: "
                    f"{problem}"
                )
            mod = checked_module(tvm.ir.load_json(task["module"]))
        except Refused:
            raise
        except Exception as err:  # noqa: BLE001 - name the task that fails
            raise Refused(
                f"task {index}: {type(err).__name__}: {_first_line(err)}"[:1000]
            ) from None
        answers.append({"name": task["name"], "weight": 1, **describe(mod),
                        "layout_free": list(layout_free_operands(mod))})  # fmt: skip
    return {"tasks": answers}


def _graph_problem(graph: Any) -> str | None:
    """What keeps ``graph`` (a module's JSON, decoded) from being a TVM object graph, or None.

    TVM's loader (``tvm.ir.load_json`` and its upgrade of old graphs) indexes the document
    without checking its shape: a list, a number or a node that is not an object made it raise
    Python's own errors (``AttributeError: 'list' object has no attribute 'get'``), which were
    the submitter's answer. The shape it reads is checked here first."""
    if not isinstance(graph, dict):
        return f"a JSON {_json_kind(graph)}, not an object"
    nodes = graph.get("nodes", [])
    if not isinstance(nodes, list):
        return f"nodes is a JSON {_json_kind(nodes)}, not a list"
    for number, node in enumerate(nodes):
        if not isinstance(node, dict):
            return f"node {number} is a JSON {_json_kind(node)}, not an object"
        kind = node.get("type", "")
        if not isinstance(kind, str):
            return f"node {number}: type is a JSON {_json_kind(kind)}, not a string"
        # A variable's fields are renamed by the upgrade: they must be an object (a string's
        # or a number's node holds its value there).
        if kind in VAR_NODE_TYPES and not isinstance(node.get("data", {}), dict):
            return f"node {number}: data is a JSON {_json_kind(node['data'])}, not an object"
    return None


# The node types whose ``data`` TVM's upgrade of old graphs reads as a field object.
VAR_NODE_TYPES = frozenset({"ir.Var", "tirx.Var", "relax.expr.Var", "relax.expr.DataflowVar"})


def _json_kind(value: Any) -> str:
    kinds = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"),
             (list, "list"), (dict, "object"))  # fmt: skip
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def _first_line(err: BaseException) -> str:
    """The line of an exception's text that says what failed (TVM's ``error:`` line, else the
    last): never a whole C++ or Python traceback."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    return next((line for line in lines if line.startswith("error:")), lines[-1] if lines else "")


def _records(raw: Any, tasks: list[Any]) -> tuple[list[Any], int]:
    """The records that match a task, pass the trace gate and replay on it, and how many
    matched but did not."""
    from tvm.s_tir.schedule import Schedule, Trace

    if not isinstance(raw, list):
        raise _refused("records", "records must be a list")
    by_hash = {structural_hash(task.mod): task for task in tasks}
    kept, failed = [], 0
    for record in raw:
        if not (isinstance(record, dict) and isinstance(record.get("shash"), str)):
            raise _refused("records", "every record needs a shash")
        task = by_hash.get(record["shash"])
        if task is None:
            continue
        try:
            trace = check_trace_text(record["trace_json"])
            register_named_intrinsics(record["trace_json"])  # tunehub's own, named by it
            run_secs = [float(x) for x in record["run_secs"]]
            Trace.apply_json_to_schedule(trace, Schedule(task.mod))
            kept.append(TaskRecord(record["shash"], record["trace_json"], run_secs,
                                    list(record["args_info"])))  # fmt: skip
            del by_hash[record["shash"]]  # the first record of a task is its schedule
        except Exception:  # noqa: BLE001 - a trace that does not replay is skipped, and counted
            failed += 1
    return kept, failed


def model_compile(
    format: str,  # noqa: A002
    source: str,
    inputs: Any,
    target: Any,
    records: Any,
    layout: str = PLAIN,
    precision: str = FLOAT32,
) -> dict[str, Any]:
    """Build the model in ``layout`` and ``precision`` untuned and with ``records`` applied,
    check both agree on the same seeded inputs, and agree with the model built plainly (exact
    math, the plain layout, float32: the tasks are tuned with fast math,
    `tuning.models.pipeline.tuning_pipeline`), time both, and write the tuned library to
    ``/out/model.so``. A bfloat16 model agrees with float32 by `tuning.models.run.agreement`
    on `AGREEMENT_INPUTS` seeded inputs (its lowest cosine is ``min_cosine``)."""

    mod, target, given = _imported(format, source, inputs, target)
    fused = _fused(mod, target, layout, precision=precision)
    exact = _fused(mod, target, PLAIN, fast_math=False)
    if str(target.kind.name) != "llvm":
        raise _refused("target", "models are compiled (and checked) on CPU targets only")
    tasks = extract(fused, target)
    kept, failed = _records(records, tasks)
    BUILD_DIR.mkdir()
    arrays = random_inputs(given)
    built = {}
    for name, chosen in (("untuned", []), ("tuned", kept)):
        path = BUILD_DIR / f"{name}.so"
        export_library(compile_with(fused, target, database_of(tasks, chosen, target)), path)
        built[name] = run_library(path, arrays)
    tolerance = (ATOL, RTOL) if precision == FLOAT32 else (BF16_ATOL, BF16_RTOL)
    try:
        error = max_abs_error(built["untuned"].outputs, built["tuned"].outputs, *tolerance)
    except OutputsDiffer as err:
        raise Refused(f"the tuned model is wrong: {err}") from None
    path = BUILD_DIR / "exact.so"
    export_library(compile_with(exact, target, database_of([], [], target)), path)
    min_cosine = None
    try:
        if precision == FLOAT32:
            max_abs_error(run_library(path, arrays, timed=False).outputs, built["tuned"].outputs)
        else:
            many = [random_inputs(given, seed) for seed in range(AGREEMENT_INPUTS)]
            min_cosine = agreement(outputs_on(path, many), outputs_on(BUILD_DIR / "tuned.so", many))
    except OutputsDiffer as err:
        moved = "fast math or the layout" if precision == FLOAT32 else f"{precision}"
        raise Refused(
            f"{moved} moved the model's output beyond tolerance (against float32 in the plain "
            f"layout, exact math): {err}"
        ) from None
    with open(BUILD_DIR / "tuned.so", "rb") as src, open(OUT_DIR / OUTPUT_FILE, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return {
        "applied": len(kept),
        "skipped": failed,
        "tasks": len(tasks),
        "untuned_ms": built["untuned"].median_ms,
        "tuned_ms": built["tuned"].median_ms,
        "max_abs_error": error if math.isfinite(error) else 0.0,
        "min_cosine": min_cosine,
    }


MODEL_REQUESTS: dict[str, Callable[..., dict[str, Any]]] = {
    "model_tasks": model_tasks,
    "derive_many": derive_many,
    "uploaded_tasks": uploaded_tasks,
    "model_compile": model_compile,
}
