"""A user's model (ONNX bytes or Relax TVMScript) as a Relax IRModule with its weights bound.

Untrusted: call only inside the jail (`tuning.untrusted.model_requests`). The checks here refuse
what TVM would otherwise act on unasked (external-data files, initializers declaring more than
`MAX_TENSOR_BYTES` before anything allocates them, packed and extern calls in Relax, TIR that
`check_user_function` does not prove safe); the jail's limits bound everything else.
`ModelRefused` carries the reason and the request field it concerns.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from tuning.checks.tir_checks import UnsafeTir, check_user_function
from tuning.models.inputs import ModelInput

MAX_TENSOR_BYTES = 1 << 30  # one initializer (or Constant node value), as its dims declare
MAX_TOTAL_TENSOR_BYTES = 2 << 30  # all of them together
FORMATS = ("onnx", "relax")
# Relax operators that call packed or extern code, print, or address VM / memory internals.
DENIED_OPS = frozenset(
    {
        "relax.call_packed",
        "relax.call_dps_packed",
        "relax.call_pure_packed",
        "relax.call_builtin_with_ctx",
        "relax.call_inplace_packed",
        "relax.print",
        "relax.assert_op",
    }
)
DENIED_OP_PREFIXES = ("relax.vm.", "relax.builtin.", "relax.memory.", "relax.runtime.")
CALL_TIR_OPS = frozenset({"relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad"})


class ModelRefused(ValueError):
    """The model is not one the service accepts; ``field`` is "source" or "inputs"."""

    def __init__(self, message: str, field: str = "source") -> None:
        super().__init__(message)
        self.field = field


def relax_module(fmt: str, source: bytes | str, inputs: Sequence[ModelInput]) -> Any:
    """The Relax IRModule of a model in ``fmt`` ("onnx": the file's bytes; "relax": TVMScript
    text of an ``@I.ir_module`` with a Relax ``main``), its inputs bound to ``inputs``."""
    if fmt == "onnx":
        if not isinstance(source, bytes):
            raise ModelRefused("an ONNX model is its file's bytes")
        return _from_onnx(source, inputs)
    if fmt == "relax":
        if not isinstance(source, str):
            raise ModelRefused("a Relax model is TVMScript text")
        return _from_relax(source, inputs)
    raise ModelRefused(f"unknown model format {fmt!r}: use one of {', '.join(FORMATS)}")


# -- ONNX ------------------------------------------------------------------------------------


def _from_onnx(data: bytes, inputs: Sequence[ModelInput]) -> Any:
    try:
        import onnx
    except ImportError:
        raise ModelRefused("the service has no ONNX support: install tunehub[onnx]") from None
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as err:  # noqa: BLE001 - protobuf's DecodeError and kin
        raise ModelRefused(f"not an ONNX model: {type(err).__name__}: {err}"[:300]) from None
    if not model.HasField("graph") or model.ir_version < 3:
        raise ModelRefused("not an ONNX model (no graph, or an IR version before 3)")
    _check_tensors(model)
    _check_onnx_inputs(model.graph, inputs)
    try:
        return from_onnx(
            model,
            shape_dict={i.name: list(i.shape) for i in inputs},
            dtype_dict={i.name: i.dtype for i in inputs},
            keep_params_in_input=False,
        )
    except Exception as err:  # noqa: BLE001 - an unsupported operator, a bad attribute …
        message = str(err).strip().splitlines()
        raise ModelRefused(
            f"TVM cannot import this ONNX model: {type(err).__name__}: "
            f"{message[-1] if message else ''}"[:500]
        ) from None


def _tensors(graph: Any) -> Iterator[tuple[str, Any]]:
    """Every tensor a graph holds (initializers, sparse initializers' parts, Constant values
    and other tensor attributes), subgraphs (If, Loop, Scan bodies) included."""
    for tensor in graph.initializer:
        yield f"initializer {tensor.name!r}", tensor
    for sparse in graph.sparse_initializer:
        yield f"sparse initializer {sparse.values.name!r}", sparse.values
        yield f"sparse initializer {sparse.values.name!r}'s indices", sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            where = f"node {node.name or node.op_type!r}'s attribute {attr.name!r}"
            if attr.HasField("t"):
                yield where, attr.t
            if attr.HasField("sparse_tensor"):
                yield where, attr.sparse_tensor.values
                yield where, attr.sparse_tensor.indices
            for tensor in attr.tensors:
                yield where, tensor
            for sparse in attr.sparse_tensors:
                yield where, sparse.values
                yield where, sparse.indices
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)


def _check_tensors(model: Any) -> None:
    """No tensor refers to external data, and none declares more than `MAX_TENSOR_BYTES`
    (checked on the declared dims, before anything allocates them)."""
    import onnx

    total = 0
    for where, tensor in _tensors(model.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            raise ModelRefused(f"{where} refers to external data: embed every tensor in the file")
        dims = list(tensor.dims)
        if any(d < 0 for d in dims):
            raise ModelRefused(f"{where} declares a negative dimension")
        try:
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        except (KeyError, ValueError, TypeError):
            raise ModelRefused(f"{where} has an unknown data type {tensor.data_type}") from None
        size = math.prod(dims) * max(itemsize, 1)
        if size > MAX_TENSOR_BYTES:
            raise ModelRefused(f"{where} declares {size} bytes, over {MAX_TENSOR_BYTES}")
        total += size
    if total > MAX_TOTAL_TENSOR_BYTES:
        raise ModelRefused(f"the model's tensors declare {total} bytes, over the limit")


def _check_onnx_inputs(graph: Any, inputs: Sequence[ModelInput]) -> None:
    """The graph's inputs (initializers aside) are exactly ``inputs``, and where the graph
    declares a rank or a fixed dim, the given shape agrees."""
    import onnx

    initializers = {t.name for t in graph.initializer}
    declared = {i.name: i for i in graph.input if i.name not in initializers}
    given = {i.name: i for i in inputs}
    if set(declared) != set(given):
        raise ModelRefused(
            f"the model's inputs are {sorted(declared)}, the request names {sorted(given)}",
            "inputs",
        )
    for name, info in declared.items():
        want = given[name]
        tensor_type = info.type.tensor_type
        if not info.type.HasField("tensor_type"):
            raise ModelRefused(f"input {name!r} is not a tensor", "inputs")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name
        if dtype != want.dtype:
            raise ModelRefused(
                f"input {name!r} is {dtype} in the model, not {want.dtype}", "inputs"
            )
        if not tensor_type.HasField("shape"):
            continue
        dims = tensor_type.shape.dim
        if len(dims) != len(want.shape):
            raise ModelRefused(
                f"input {name!r} has rank {len(dims)} in the model, not {len(want.shape)}", "inputs"
            )
        for axis, (dim, value) in enumerate(zip(dims, want.shape, strict=True)):
            if dim.HasField("dim_value") and dim.dim_value != value:
                raise ModelRefused(
                    f"input {name!r} has dim {dim.dim_value} at axis {axis}, not {value}", "inputs"
                )


# -- Relax TVMScript -------------------------------------------------------------------------


def _from_relax(text: str, inputs: Sequence[ModelInput]) -> Any:
    import tvm
    from tvm import relax
    from tvm.script.parser.core.entry import parse as parse_script

    try:
        mod = parse_script(text)
    except Exception as err:  # noqa: BLE001 - the parser's diagnostics
        lines = [line for line in str(err).splitlines() if line.strip()]
        found = next((line for line in lines if line.strip().startswith("error:")), None)
        reason = found or (lines[-1] if lines else "")
        raise ModelRefused(f"TVMScript does not parse: {reason}"[:500]) from None
    if not isinstance(mod, tvm.IRModule):
        raise ModelRefused("the source must define an @I.ir_module")
    main = mod.functions.get(mod.get_global_var("main")) if "main" in _names(mod) else None
    if not isinstance(main, relax.Function):
        raise ModelRefused("the module needs a Relax function 'main'")
    check_relax_module(mod)
    _check_relax_inputs(main, inputs)
    return mod


def _names(mod: Any) -> set[str]:
    return {gv.name_hint for gv in mod.get_global_vars()}


def check_relax_module(mod: Any) -> None:
    """Refuse a module holding anything but Relax functions that call Relax operators (none
    of `DENIED_OPS`), each other, and — through ``call_tir`` — the module's own PrimFuncs,
    which must all pass `check_user_function`."""
    import tvm
    from tvm import relax

    prim_funcs = set()
    for gv, func in mod.functions_items():
        if isinstance(func, tvm.tirx.PrimFunc):
            try:
                check_user_function(func)
            except UnsafeTir as err:
                raise ModelRefused(f"PrimFunc {gv.name_hint}: {err}") from None
            prim_funcs.add(gv.name_hint)
        elif not isinstance(func, relax.Function):
            raise ModelRefused(f"{gv.name_hint} is a {type(func).__name__}, not allowed")
    relax_funcs = _names(mod) - prim_funcs
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            problems = _problems(func, prim_funcs, relax_funcs)
            if problems:
                raise ModelRefused(f"function {gv.name_hint}: {problems[0]}")


def _problems(func: Any, prim_funcs: set[str], relax_funcs: set[str]) -> list[str]:
    """What `_check_node` finds wrong anywhere in the Relax function ``func``."""
    from tvm import relax

    problems: list[str] = []
    relax.analysis.post_order_visit(
        func, lambda node: _check_node(node, prim_funcs, relax_funcs, problems)
    )
    return problems


def _check_node(node: Any, prim_funcs: set[str], relax_funcs: set[str], out: list[str]) -> None:
    import tvm
    from tvm import relax

    if isinstance(node, relax.ExternFunc):
        out.append(f"extern function {node.global_symbol!r} is not allowed")
    if not isinstance(node, relax.Call):
        return
    op = node.op
    if isinstance(op, tvm.ir.Op):
        name = str(op.name)
        if (
            not name.startswith("relax.")
            or name in DENIED_OPS
            or name.startswith(DENIED_OP_PREFIXES)
        ):
            out.append(f"operator {name} is not allowed")
        elif name in CALL_TIR_OPS:
            callee = node.args[0] if node.args else None
            if not (isinstance(callee, tvm.ir.GlobalVar) and callee.name_hint in prim_funcs):
                out.append(f"{name} may only call the module's own PrimFuncs")
    elif isinstance(op, tvm.ir.GlobalVar):
        if op.name_hint not in relax_funcs:
            out.append(f"call of {op.name_hint}: only the module's Relax functions are callable")
    else:
        out.append(f"a call of a {type(op).__name__} is not allowed")


def _check_relax_inputs(main: Any, inputs: Sequence[ModelInput]) -> None:
    """``main``'s parameters are ``inputs``, in order, with the same static shapes and dtypes."""
    from tvm import relax

    names = [str(p.name) for p in main.params]
    if names != [i.name for i in inputs]:
        raise ModelRefused(f"main's parameters are {names}, the request names "
                           f"{[i.name for i in inputs]}", "inputs")  # fmt: skip
    for param, want in zip(main.params, inputs, strict=True):
        info = param.ty
        if not isinstance(info, relax.TensorType) or info.shape is None:
            raise ModelRefused(f"main's parameter {want.name!r} is not a tensor of known rank")
        shape = info.shape.values if hasattr(info.shape, "values") else None
        if shape is None or not all(hasattr(d, "value") for d in shape):
            raise ModelRefused(f"main's parameter {want.name!r} must have a static shape")
        declared = tuple(int(d.value) for d in shape)
        if declared != want.shape or str(info.dtype) != want.dtype:
            raise ModelRefused(
                f"main's parameter {want.name!r} is {declared} {info.dtype} in the source, "
                f"not {want.shape} {want.dtype}",
                "inputs",
            )
