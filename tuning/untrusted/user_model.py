"""A user's whole model (ONNX or Relax TVMScript) parsed, split into tuning tasks and compiled
without trusting it: the service-facing side of `tuning.untrusted.model_requests`.

`parse_model` imports the model, runs the pre-tuning pipeline and extracts its tasks in one
isolated child; a second, fresh child re-derives every task from the first child's JSON and
the two must agree on each (as `tuning.untrusted.user_tir` does for one function), so a child
that the model took over can lie only about functions a clean child then checks. Every field
of both answers is checked here. `compile_model` builds the model untuned and with the tuned
records in a third child, which checks both agree, times both and writes the tuned Relax VM
library into a directory of this process's (see `tuning.jail.run_isolated`'s ``output_dir``).
"""

from __future__ import annotations

import ast
import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tuning.checks.library_check import UnsafeLibrary, check_library
from tuning.checks.script_filter import check_script_names
from tuning.jail import Limits, SandboxFailed, holding_slot
from tuning.jail.isolated import MODEL_COMPILE_LIMITS, MODEL_IMPORT_LIMITS
from tuning.models.blocked_layout import PLAIN
from tuning.models.inputs import DTYPES, InvalidInputs, ModelInput, check_inputs
from tuning.models.precision import FLOAT32
from tuning.models.run import MIN_COSINE
from tuning.untrusted.ask import ask
from tuning.untrusted.user_tir import ALLOWED_IMPORTS, MAX_SHASH_DIGITS
from tuning.untrusted.user_tir import FREE_NAMES as TIR_NAMES

MAX_ONNX_BYTES = 512 << 20  # base64 in the request to the child: 683 MiB of JSON
MAX_RELAX_BYTES = 4 << 20  # TVMScript text (weights are R.const metadata, rarely inline)
MAX_TASKS = 500
MAX_NAME_CHARS = 256
MAX_WEIGHT = 1 << 20
OUTPUT_FILE = "model.so"
RELAX_IMPORTS = ALLOWED_IMPORTS | {"tvm.script.relax"}
FREE_NAMES = TIR_NAMES | {"R"}  # names TVMScript text may read without binding them
METADATA = "metadata"  # the name TVM prints a module's constants (weights) under


class ModelRejected(ValueError):
    """The model (``field`` "source"), its declared inputs ("inputs") or the compile's
    records ("records") are refused; the message says why."""

    def __init__(self, message: str, field: str = "source") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ParsedTask:
    """One tuning task of a model: a checked workload (as `user_tir.ParsedTir`), its name,
    how often the model runs it, and the operands its schedule may repack."""

    name: str
    weight: int
    mod_json: str
    shash: str
    flop: float
    layout_free: tuple[int, ...]


@dataclass(frozen=True)
class ModelOutput:
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class ParsedModel:
    """A model's tasks (re-derived and agreed on by two children), its outputs, and the names
    of the functions left untuned because they fail a check (built as TVM writes them)."""

    tasks: list[ParsedTask]
    outputs: list[ModelOutput]
    untunable: list[str]


@dataclass(frozen=True)
class CompiledModel:
    """The exported tuned Relax VM library and what its compile measured (median ms on the
    target's cores, in the jail) on seeded random inputs."""

    path: Path
    applied: int
    tasks: int
    skipped: int
    untuned_ms: float
    tuned_ms: float
    max_abs_error: float
    min_cosine: float | None = None  # a reduced-precision model's lowest cosine to float32


def _request_source(fmt: str, source: bytes | str) -> str:
    """The source as the child takes it (ONNX base64, Relax text), after the parent's own
    cheap checks (size; for Relax, `check_syntax`'s filter with Relax's names)."""
    if fmt == "onnx":
        data = source.encode() if isinstance(source, str) else source
        if len(data) > MAX_ONNX_BYTES:
            raise ModelRejected(f"the ONNX file is larger than {MAX_ONNX_BYTES} bytes")
        return base64.b64encode(data).decode()
    if fmt == "relax":
        try:
            text = source.decode() if isinstance(source, bytes) else source
        except UnicodeDecodeError:
            raise ModelRejected("a Relax model is UTF-8 TVMScript text") from None
        if len(text.encode()) > MAX_RELAX_BYTES:
            raise ModelRejected(f"the TVMScript is larger than {MAX_RELAX_BYTES} bytes")
        return check_relax_syntax(text)
    raise ModelRejected(f"unknown model format {fmt!r}: use 'onnx' or 'relax'")


def check_relax_syntax(text: str) -> str:
    """Reject TVMScript whose Python goes beyond one ``@I.ir_module`` class (the filter of
    `user_tir.check_syntax`, with Relax's ``R``): imports of TVMScript's own modules only, no
    dunder names, no lambdas or globals, and every name read is TVMScript's or bound in the
    source (no ``eval``, ``open``, ``getattr``), and every attribute chain one TVMScript offers
    (`tuning.checks.script_filter`). One statement more is allowed, as TVM prints
    a module with weights (``mod.script(show_meta=True)``): ``metadata =
    tvm.ir.load_json("...")`` with a string literal, after which the class may read
    ``metadata``. Returns the text with its import lines blanked (the parser defines ``I``,
    ``T`` and ``R`` itself). A cheap filter, not the defence."""
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        raise ModelRejected(f"not valid Python syntax: {err.msg} (line {err.lineno})") from None
    except (RecursionError, MemoryError):  # CPython's parser gives up on deep nesting
        raise ModelRejected("the source nests too deeply to parse") from None
    lines = text.splitlines()
    classes = 0
    metadata = [node for node in tree.body if _is_metadata(node)]
    if len(metadata) > 1:
        raise ModelRejected("one metadata = tvm.ir.load_json(...) statement at most")
    for node in tree.body:
        if node in metadata:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            )
            if not all(name in RELAX_IMPORTS for name in names):
                raise ModelRejected(f"import of {', '.join(map(str, names))} is not allowed")
            for index in range(node.lineno - 1, node.end_lineno or node.lineno):
                lines[index] = ""
        elif isinstance(node, ast.ClassDef):
            classes += 1
        else:
            raise ModelRejected(f"only an @I.ir_module class is allowed, found "
                                f"{type(node).__name__} at line {node.lineno}")  # fmt: skip
    if classes != 1:
        raise ModelRejected("exactly one @I.ir_module class is expected")
    # The metadata statement's own names (``tvm.ir.load_json``) are checked by its shape.
    skipped = {id(n) for statement in metadata for n in ast.walk(statement)}
    for found in ast.walk(tree):
        if id(found) in skipped:
            continue
        line = getattr(found, "lineno", "?")
        if isinstance(found, (ast.Import, ast.ImportFrom)) and found not in tree.body:
            raise ModelRejected(f"import inside the module (line {line})")
        if isinstance(found, (ast.Lambda, ast.Global, ast.Nonlocal, ast.AsyncFunctionDef)):
            raise ModelRejected(f"{type(found).__name__} is not allowed (line {line})")
    readable = FREE_NAMES | ({METADATA} if metadata else set())
    check_script_names(tree, readable, ModelRejected, skipped)
    return "\n".join(lines) + "\n"


def _is_metadata(node: ast.stmt) -> bool:
    """``metadata = tvm.ir.load_json(<a string literal>)``, exactly (how TVM prints weights)."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return False
    target, call = node.targets[0], node.value
    if not (isinstance(target, ast.Name) and target.id == METADATA):
        return False
    if not (isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords):
        return False
    func, arg = call.func, call.args[0]
    return (
        isinstance(arg, ast.Constant)
        and isinstance(arg.value, str)
        and isinstance(func, ast.Attribute)
        and func.attr == "load_json"
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "ir"
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "tvm"
    )


def _checked_inputs(inputs: Sequence[ModelInput]) -> list[dict[str, Any]]:
    try:
        return [item.as_json() for item in check_inputs(inputs)]
    except InvalidInputs as err:
        raise ModelRejected(str(err), "inputs") from None


def _answered(answer: dict[str, Any]) -> dict[str, Any]:
    """A child's answer, or its refusal as `ModelRejected` at the field the refusal names."""
    if answer.get("ok") is not True:
        error = answer.get("error")
        message = error[:1000] if isinstance(error, str) else "the model was refused"
        field, _, rest = message.partition(": ")
        if field in ("source", "inputs", "records", "layout", "precision") and rest:
            raise ModelRejected(rest, field)
        raise ModelRejected(message)
    return answer


def ask_child(request: str, limits: Limits, **payload: Any) -> dict[str, Any]:
    """One isolated child's answer; its failures and refusals as `ModelRejected`."""
    try:
        return _answered(ask(request, payload, limits))
    except SandboxFailed as err:
        raise ModelRejected(str(err)) from None


def _out_of_protocol() -> ModelRejected:
    return ModelRejected("the isolated model parser answered out of protocol")


def _workload(raw: Any) -> tuple[str, str, float]:
    """(mod_json, shash, flop) of one answered task, each field checked."""
    if not isinstance(raw, dict):
        raise _out_of_protocol()
    mod_json, shash, flop = raw.get("mod_json"), raw.get("shash"), raw.get("flop")
    if not (isinstance(mod_json, str) and isinstance(shash, str) and shash.isdigit()):
        raise _out_of_protocol()
    if len(shash) > MAX_SHASH_DIGITS or type(flop) is not float:
        raise _out_of_protocol()
    if not (math.isfinite(flop) and flop >= 0):
        raise _out_of_protocol()
    return mod_json, shash, flop


def task_of_answer(raw: Any) -> ParsedTask:
    """One task of a child's answer, every field checked (`ModelRejected` out of protocol)."""
    mod_json, shash, flop = _workload(raw)
    name, weight, layout_free = raw.get("name"), raw.get("weight"), raw.get("layout_free")
    if not (isinstance(name, str) and 0 < len(name) <= MAX_NAME_CHARS and name.isprintable()):
        raise _out_of_protocol()
    if not (type(weight) is int and 1 <= weight <= MAX_WEIGHT):
        raise _out_of_protocol()
    if not (isinstance(layout_free, list) and len(layout_free) <= 64):
        raise _out_of_protocol()
    if not all(type(i) is int and 0 <= i < 1024 for i in layout_free):
        raise _out_of_protocol()
    return ParsedTask(name, weight, mod_json, shash, flop, tuple(layout_free))


def _output(raw: Any) -> ModelOutput:
    if not (isinstance(raw, dict) and isinstance(raw.get("shape"), list)):
        raise _out_of_protocol()
    shape, dtype = raw["shape"], raw.get("dtype")
    if not (len(shape) <= 16 and all(type(d) is int and 0 <= d < 1 << 40 for d in shape)):
        raise _out_of_protocol()
    if not (isinstance(dtype, str) and (dtype in DTYPES or dtype.isalnum()) and len(dtype) < 16):
        raise _out_of_protocol()
    return ModelOutput(tuple(shape), dtype)


def parse_model(
    fmt: str,
    source: bytes | str,
    inputs: Sequence[ModelInput],
    target_spec: dict[str, Any],
    layout: str = PLAIN,
    precision: str = FLOAT32,
) -> ParsedModel:
    """The tuning tasks of a user's model on ``target_spec`` (a canonical target's JSON) in
    ``layout`` (`tuning.models.blocked_layout`) and ``precision`` (`tuning.models.precision`),
    extracted in one isolated child and re-derived in a second; `ModelRejected` with the
    reason and field (and `SandboxBusy` / `SandboxUnavailable` let through)."""
    text = _request_source(fmt, source)
    given = _checked_inputs(inputs)
    with holding_slot():  # one slot for both children
        first = ask_child("model_tasks", MODEL_IMPORT_LIMITS, format=fmt, source=text,
                          inputs=given, target=target_spec, layout=layout,
                          precision=precision)  # fmt: skip
        raw_tasks, raw_outputs = first.get("tasks"), first.get("outputs")
        untunable = first.get("untunable")
        if not (isinstance(raw_tasks, list) and isinstance(raw_outputs, list)):
            raise _out_of_protocol()
        if not (isinstance(untunable, list) and len(untunable) <= MAX_TASKS):
            raise _out_of_protocol()
        if len(raw_tasks) > MAX_TASKS or not 1 <= len(raw_outputs) <= 256:
            raise _out_of_protocol()
        tasks = [task_of_answer(raw) for raw in raw_tasks]
        outputs = [_output(raw) for raw in raw_outputs]
        names = [u.get("name") if isinstance(u, dict) else None for u in untunable]
        if not all(isinstance(n, str) and len(n) <= MAX_NAME_CHARS for n in names):
            raise _out_of_protocol()
        if not tasks:
            return ParsedModel([], outputs, [str(n) for n in names])
        mod_jsons = [t.mod_json for t in tasks]
        second = ask_child("derive_many", MODEL_IMPORT_LIMITS, mod_jsons=mod_jsons)
    derived = second.get("tasks")
    if not (isinstance(derived, list) and len(derived) == len(tasks)):
        raise _out_of_protocol()
    for task, raw in zip(tasks, derived, strict=True):
        if _workload(raw) != (task.mod_json, task.shash, task.flop):
            raise ModelRejected(
                f"task {task.name}: the parser's answer does not re-derive to the same function"
            )
    if len({t.shash for t in tasks}) != len(tasks):
        raise ModelRejected("the parser answered two tasks with the same workload")
    return ParsedModel(tasks, outputs, [str(n) for n in names])


def _records(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as the child takes them (each field typed; the child replays them)."""
    checked = []
    for index, record in enumerate(records):
        shash, trace, run_secs = (
            record.get("shash"),
            record.get("trace_json"),
            record.get("run_secs"),
        )
        args_info = record.get("args_info")
        if not (isinstance(shash, str) and isinstance(trace, str)):
            raise ModelRejected(f"record {index}: shash and trace_json must be text", "records")
        if not (isinstance(run_secs, list) and isinstance(args_info, list)):
            raise ModelRejected(f"record {index}: run_secs and args_info must be lists", "records")
        checked.append({"shash": shash, "trace_json": trace, "run_secs": run_secs,
                        "args_info": args_info})  # fmt: skip
    return checked


def _figure(answer: dict[str, Any], key: str) -> float:
    value = answer.get(key)
    if not (isinstance(value, (int, float)) and type(value) is not bool):
        raise _out_of_protocol()
    if not (math.isfinite(value) and value >= 0):
        raise _out_of_protocol()
    return float(value)


def _cosine(answer: dict[str, Any]) -> float:
    """The child's lowest cosine, which its own check held to `MIN_COSINE` (held again here)."""
    value = answer.get("min_cosine")
    if not (isinstance(value, float) and MIN_COSINE <= value <= 1.0 + 1e-9):
        raise _out_of_protocol()
    return value


def _count(answer: dict[str, Any], key: str, most: int) -> int:
    value = answer.get(key)
    if not (type(value) is int and 0 <= value <= most):
        raise _out_of_protocol()
    return value


def _compile_limits(target_spec: dict[str, Any]) -> Limits:
    """The compile child's limits, its thread pool the target's cores (the model's latency is
    measured as the tasks were tuned: on every core the target names), at most 64."""
    cores = target_spec.get("num-cores")
    threads = cores if type(cores) is int and 1 <= cores <= 64 else 1
    return replace(
        MODEL_COMPILE_LIMITS,
        threads=threads,
        processes=MODEL_COMPILE_LIMITS.processes + threads,
    )


def compile_model(
    fmt: str,
    source: bytes | str,
    inputs: Sequence[ModelInput],
    target_spec: dict[str, Any],
    records: Sequence[dict[str, Any]],
    out_dir: Path,
    layout: str = PLAIN,
    precision: str = FLOAT32,
) -> CompiledModel:
    """Compile a user's model in ``layout`` and ``precision`` with ``records`` (``shash``,
    ``trace_json``, ``run_secs``, ``args_info``: its tasks' tuned schedules) in an isolated
    child; the tuned library is ``out_dir``/model.so (``out_dir``: new or empty). A record
    matching no task is ignored, one whose trace does not replay is skipped (counted).
    `ModelRejected` when the child refuses or fails (the tuned and untuned builds disagree, a
    bf16 model strays from float32, a limit, a crash) or the library fails
    `tuning.checks.library_check`."""
    text = _request_source(fmt, source)
    given = _checked_inputs(inputs)
    payload = {"format": fmt, "source": text, "inputs": given, "target": target_spec,
               "records": _records(records), "layout": layout, "precision": precision}  # fmt: skip
    try:
        answer = _answered(
            ask(
                "model_compile",
                payload,
                _compile_limits(target_spec),
                output_dir=out_dir,
                output_files=(OUTPUT_FILE,),
            )
        )
    except SandboxFailed as err:
        raise ModelRejected(str(err)) from None
    path = out_dir / OUTPUT_FILE
    if path.stat().st_size == 0:
        raise _out_of_protocol()
    try:  # every client that fetches the model loads it: nothing may run on load
        check_library(path)
    except UnsafeLibrary as err:
        raise ModelRejected(f"the compiled model is refused: {err}") from None
    tasks = _count(answer, "tasks", MAX_TASKS * 4)
    return CompiledModel(
        path=path,
        applied=_count(answer, "applied", len(records)),
        tasks=tasks,
        skipped=_count(answer, "skipped", len(records)),
        untuned_ms=_figure(answer, "untuned_ms"),
        tuned_ms=_figure(answer, "tuned_ms"),
        max_abs_error=_figure(answer, "max_abs_error"),
        min_cosine=_cosine(answer) if precision != FLOAT32 else None,
    )
