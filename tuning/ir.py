"""IRModule helpers every stage shares: the module MetaSchedule tunes for a PrimFunc, its
structural hash (a workload's identity), loading a stored module, a function's operands, and
the attribute that marks operands layout-free.

TVM is imported inside the helpers: the API imports this module and starts without TVM."""

from __future__ import annotations

from typing import Any

LAYOUT_FREE_ATTR = "layout_free_buffers"
"""PrimFunc attribute listing the parameters (weights) whose layout MetaSchedule's
`RewriteLayout` may change (the packed space sets it; user TIR may carry it)."""


def normalize(func: Any) -> Any:
    """The IRModule MetaSchedule tunes for a PrimFunc: one function "main"."""
    import tvm

    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def structural_hash(mod: Any) -> str:
    """Structural hash of an IRModule, as MetaSchedule's Workload JSON writes it."""
    import tvm_ffi

    return str(tvm_ffi.structural_hash(mod))


def load_mod(mod_json: str) -> Any:
    """The IRModule stored in a workload row."""
    import tvm

    return tvm.ir.load_json(mod_json)


def param_buffer(func: Any, param: Any) -> Any:
    """The buffer behind a PrimFunc parameter (TVM 0.27's parameters are buffers already)."""
    buffer_map = getattr(func, "buffer_map", None)
    return buffer_map[param] if buffer_map is not None else param


def layout_free_buffers(func: Any) -> list[Any]:
    """The buffers of ``func``'s parameters it lists as layout-free (`LAYOUT_FREE_ATTR`: the
    weights a schedule may re-lay out once, at load)."""
    free = func.attrs.get(LAYOUT_FREE_ATTR, []) if func.attrs else []
    return [param_buffer(func, func.params[int(i)]) for i in free]


def arg_specs(func: Any) -> list[tuple[list[int], str]]:
    """(shape, dtype) of every parameter buffer of a PrimFunc, in call order."""
    specs = []
    for param in func.params:
        buf = param_buffer(func, param)
        specs.append(([int(x) for x in buf.shape], str(buf.dtype)))
    return specs


def layout_free_operands(mod: Any) -> tuple[int, ...]:
    """The parameters ``mod``'s "main" lists as layout-free (`LAYOUT_FREE_ATTR`), e.g. the
    weights Relax's ``AttachAttrLayoutFreeBuffers`` marks in a model's task; () when none."""
    attrs = mod["main"].attrs
    if attrs is None or LAYOUT_FREE_ATTR not in attrs:
        return ()
    return tuple(int(i) for i in attrs[LAYOUT_FREE_ATTR])


def reduction_length(func: Any) -> int:
    """The most terms any block of a PrimFunc sums into one output element: the product of its
    reduction iterators' extents, largest over the blocks (1 without a reduction). A float
    kernel's rounding error grows with it: verification tolerances scale by it."""
    from tvm.tirx import IterVar

    longest = 1

    def visit(node: Any) -> None:
        nonlocal longest
        kind = type(node).__name__
        if kind == "SeqStmt":
            for item in node.seq:
                visit(item)
        elif kind in ("For", "AttrStmt", "LetStmt"):
            visit(node.body)
        elif kind == "IfThenElse":
            visit(node.then_case)
            if node.else_case is not None:
                visit(node.else_case)
        elif kind == "SBlockRealize":
            block = node.block
            terms = 1
            for iv in block.iter_vars:
                if int(iv.iter_type) == IterVar.CommReduce:
                    extent = getattr(iv.dom.extent, "value", None)
                    terms *= int(extent) if extent is not None else 1
            longest = max(longest, terms)
            visit(block.body)

    visit(func.body)
    return longest


def bytes_moved(func: Any) -> int:
    """The bytes a PrimFunc must move at the least: every parameter buffer (inputs and outputs)
    read or written once. With `tuning.hardware.bandwidth` it bounds a kernel's time from below
    (a memory-bound task's roofline)."""
    import math

    import tvm

    total = 0
    for param in func.params:
        buf = param_buffer(func, param)
        if not all(isinstance(dim, int | tvm.tirx.IntImm) for dim in buf.shape):
            continue  # a dynamic dimension: no static count
        bits = tvm.DataType(str(buf.dtype)).bits * tvm.DataType(str(buf.dtype)).lanes
        total += math.prod(int(dim) for dim in buf.shape) * bits // 8
    return total


def uses(expr: Any, var: Any) -> bool:
    """True when the TIR expression ``expr`` refers to the variable ``var``."""
    from tvm.tirx.analysis import undefined_vars

    return any(used.same_as(var) for used in undefined_vars(expr))
