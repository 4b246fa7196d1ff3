"""What a user's TIR function may contain, checked before anything stores, builds or runs it.

`check_user_function(func)` walks an unscheduled PrimFunc and raises `UnsafeTir` unless:
- every call is to an allow-listed intrinsic (arithmetic, ``exp``/``log``/``erf``/``tanh``/
  ``sqrt``/``sigmoid`` and kin, ``if_then_else``, casts, ``q_multiply_shift`` …): no
  ``call_extern``, ``call_packed``, ``call_pure_extern``, LLVM intrinsics, pointer or
  address intrinsics; no ``While``, ``Break``, ``Return``, attribute statements or
  ``match_buffer``;
- every buffer is a parameter (static shape, compact: no strides, no element offset) or
  allocated by a block (static shape, at most `MAX_ALLOC_BYTES` in all);
- every buffer access is **proved in bounds** by TVM's arithmetic analyzer, with each loop
  variable bound to its range, each block variable to its binding, and the conditions of
  ``if_then_else``, ``IfThenElse`` and block predicates in scope (a ``Select`` evaluates both
  arms, so no condition helps there); every block binding is proved inside its block
  variable's domain and every access inside its block's declared read/write regions, because
  the schedule rules size cache buffers and loops from those. What cannot be proved is
  refused: TIR indexes memory unchecked, and the kernel runs in a worker.
The scheduled modules MetaSchedule derives from a checked function are the service's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from tuning.ir import LAYOUT_FREE_ATTR, param_buffer

MAX_ALLOC_BYTES = 256 << 20
_MATH = (
    "exp", "exp2", "exp10", "log", "log10", "log1p", "erf", "tanh", "sqrt", "rsqrt", "sigmoid",
    "fabs", "floor", "round", "trunc", "nearbyint", "pow", "fmod", "isnan", "isinf", "isfinite",
    "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
    "atan2", "copysign", "hypot", "ldexp", "nextafter", "fma", "popcount", "reinterpret",
    "q_multiply_shift", "q_multiply_shift_per_axis",
)  # fmt: skip
ALLOWED_CALLS = frozenset(
    {"prim.if_then_else", "prim.likely", "prim.ceil", "prim.log2", "prim.clz"}
    | {f"tirx.{name}" for name in _MATH}
)
ALLOWED_FUNC_ATTRS = frozenset(
    {"global_symbol", "tirx.noalias", "tir.noalias", "s_tir", "op_pattern", LAYOUT_FREE_ATTR}
)
BINARY = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE",
        "LT", "LE", "GT", "GE", "And", "Or", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "LShift",
        "RShift",
    }
)  # fmt: skip
ALLOC_SCOPES = frozenset({"global", "local", ""})


SCHEDULE_RULES = frozenset(
    f"meta_schedule.{name}" for name in ("pool_avg", "pool_max", "adaptive_pool_avg",
                                         "adaptive_pool_max")
)  # fmt: skip
# Block annotations TE and TOPI write (anything else is the scheduler's, or links code).
BLOCK_ANNOTATIONS = {
    "axis": lambda value: _constant(value) is not None,
    "schedule_rule": lambda value: str(value) in SCHEDULE_RULES,
}


def _subexpressions(expr: Any) -> Iterator[Any]:
    """``expr`` and every expression below it (children as `_Checker.expr` walks them). TIR
    nodes are probed by their fields (``ty``: a PrimExpr), as TVM's own visitors read them."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        for field in ("a", "b", "value", "base", "stride", "condition", "true_value",
                      "false_value", "body"):  # fmt: skip
            child = getattr(node, field, None)
            if child is not None and hasattr(child, "ty"):
                stack.append(child)
        for field in ("args", "indices"):
            stack.extend(getattr(node, field, None) or ())


def _reads_memory(expr: Any) -> bool:
    return any(type(node).__name__ == "TensorLoad" for node in _subexpressions(expr))


class UnsafeTir(ValueError):
    """A function the service will not store, build or run (the message says where and why)."""


def _constant(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if type(value).__name__ == "IntImm" else None


def _static_shape(buffer: Any, what: str) -> list[int]:
    shape = [_constant(x) for x in buffer.shape]
    if not all(x is not None and x >= 0 for x in shape):
        raise UnsafeTir(f"{what} {buffer.name!r} must have a static shape")
    return [int(x) for x in shape if x is not None]


def _compact(buffer: Any, what: str) -> None:
    if len(buffer.strides) or _constant(buffer.elem_offset) != 0:
        raise UnsafeTir(f"{what} {buffer.name!r} must be compact (no strides, no element offset)")


class _Checker:
    def __init__(self, func: Any) -> None:
        from tvm.sym import Analyzer

        self.analyzer = Analyzer()
        self.buffers: dict[int, list[int]] = {}  # by object handle (hash)
        self.objects: list[Any] = []
        self.allocated = 0
        self.regions: list[tuple[list[Any], list[Any]]] = []  # (reads, writes) per open block
        for param in func.params:
            buffer = param_buffer(func, param)
            # A TVM Buffer has these; a parameter that is not one (a scalar Var) does not.
            if not hasattr(buffer, "shape") or not hasattr(buffer, "elem_offset"):
                raise UnsafeTir(f"parameter {param} must be a buffer")
            _compact(buffer, "parameter")
            self.buffers[hash(buffer)] = _static_shape(buffer, "parameter")
            self.objects.append(buffer)
        for key, value in (dict(func.attrs) if func.attrs is not None else {}).items():
            if key not in ALLOWED_FUNC_ATTRS:
                raise UnsafeTir(f"function attribute {key!r} is not allowed")
            if key == LAYOUT_FREE_ATTR and not all(
                _constant(i) is not None and 0 <= int(i) < len(func.params) for i in value
            ):
                raise UnsafeTir("layout_free_buffers must name parameters")

    # ------------------------------------------------------------------ proofs
    def prove(self, claim: Any, what: str) -> None:
        if not self.analyzer.can_prove(claim):
            raise UnsafeTir(f"cannot prove {what}")

    def within(self, index: Any, low: Any, extent: Any, what: str) -> None:
        for point in self._lanes(index):
            self.prove(point >= low, f"{what}: {point} >= {low}")
            self.prove(point < low + extent, f"{what}: {point} < {low + extent}")

    @staticmethod
    def _lanes(index: Any) -> list[Any]:
        if type(index).__name__ == "Ramp":
            lanes = int(index.lanes)
            return [index.base, index.base + index.stride * (lanes - 1)]
        return [index]

    def access(self, buffer: Any, indices: list[Any], write: bool) -> None:
        shape = self.buffers.get(hash(buffer))
        if shape is None:
            raise UnsafeTir(f"buffer {buffer.name!r} is neither a parameter nor allocated")
        if len(indices) != len(shape):
            raise UnsafeTir(f"buffer {buffer.name!r} takes {len(shape)} indices")
        for index in indices:
            self.expr(index)
            self.index_safe(index, f"an index of {buffer.name!r}")
        for axis, (index, extent) in enumerate(zip(indices, shape, strict=True)):
            self.within(index, 0, extent, f"{buffer.name}[axis {axis}] in bounds")
        if self.regions:
            reads, writes = self.regions[-1]
            declared = writes if write else reads + writes
            if not any(self._in_region(region, buffer, indices) for region in declared):
                kind = "write" if write else "read"
                raise UnsafeTir(f"a {kind} of {buffer.name!r} lies outside its block's regions")

    def _in_region(self, region: Any, buffer: Any, indices: list[Any]) -> bool:
        if not region.source.same_as(buffer):
            return False
        for index, rng in zip(indices, region.region, strict=False):
            for point in self._lanes(index):
                if not (self.analyzer.can_prove(point >= rng.min)
                        and self.analyzer.can_prove(point < rng.min + rng.extent)):  # fmt: skip
                    return False
        return True

    @contextmanager
    def assuming(self, condition: Any) -> Iterator[None]:
        # Simplified first: the analyzer uses `0 < i` (with i the bound loop variable) where it
        # cannot use `vi > 0` as written.
        # A condition on loaded data is no fact: a store between the test and the access can
        # change the data. Such guards are ignored, so what they guard must prove on its own.
        if _reads_memory(condition):
            yield
            return
        self.index_safe(condition, "a condition")
        with self.analyzer.constraint_scope(self.analyzer.simplify(condition)):
            yield

    def bind(self, var: Any, value: Any) -> None:
        """Let the analyzer substitute ``value`` for ``var`` unless it reads memory (stale);
        its arithmetic must not wrap, since the analyzer will reason with it."""
        self.index_safe(value, f"the value of {var}")
        if not _reads_memory(value):
            self.analyzer.bind(var, value)

    def index_safe(self, expr: Any, what: str) -> None:
        """Integer arithmetic that feeds an index, a loop bound or a binding never wraps: the
        analyzer reasons as if integers were unbounded, the machine code wraps int8/int16 and
        treats int32/int64 overflow as undefined."""
        for node in _subexpressions(expr):
            dtype = str(getattr(node, "ty", ""))
            if not dtype.startswith(("int", "uint")) or type(node).__name__ in ("IntImm", "Var"):
                continue
            import tvm

            info = tvm.DataType(dtype)
            low = 0 if dtype.startswith("uint") else -(1 << (info.bits - 1))
            high = (1 << (info.bits - (0 if dtype.startswith("uint") else 1))) - 1
            bound = self.analyzer.const_int_bound(node)
            if bound.min_value < low or bound.max_value > high:
                raise UnsafeTir(f"{what}: {node} may overflow {dtype}")

    # ------------------------------------------------------------------ walk
    def expr(self, node: Any) -> None:
        kind = type(node).__name__
        if kind in ("Var", "IntImm", "FloatImm"):
            return
        if kind in BINARY:
            self.expr(node.a)
            self.expr(node.b)
        elif kind in ("Not", "BitwiseNot"):
            self.expr(node.a)
        elif kind in ("Cast", "Broadcast"):
            self.expr(node.value)
        elif kind == "Ramp":
            self.expr(node.base)
            self.expr(node.stride)
        elif kind == "Select":  # both arms are evaluated: no condition protects them
            self.expr(node.condition)
            self.expr(node.true_value)
            self.expr(node.false_value)
        elif kind == "Let":
            self.expr(node.value)
            self.bind(node.var, node.value)
            self.expr(node.body)
        elif kind == "TensorLoad":
            self.access(node.source, list(node.indices), write=False)
        elif kind == "Call":
            self.call(node)
        else:
            raise UnsafeTir(f"expression {kind} is not allowed")

    def call(self, node: Any) -> None:
        from tvm.ir import Op

        name = node.op.name if isinstance(node.op, Op) else str(node.op)
        if name not in ALLOWED_CALLS:
            raise UnsafeTir(f"call to {name!r} is not allowed (only arithmetic intrinsics are)")
        if name == "prim.if_then_else":
            condition, then_value, else_value = node.args
            self.expr(condition)
            with self.assuming(condition):
                self.expr(then_value)
            with self.assuming(self._not(condition)):
                self.expr(else_value)
            return
        for arg in node.args:
            self.expr(arg)

    @staticmethod
    def _not(condition: Any) -> Any:
        from tvm.tirx import Not

        return Not(condition)

    def stmt(self, node: Any) -> None:
        kind = type(node).__name__
        if kind == "SeqStmt":
            for item in node.seq:
                self.stmt(item)
        elif kind == "For":
            self._for(node)
        elif kind == "SBlockRealize":
            self._block(node)
        elif kind == "BufferStore":
            self.expr(node.value)
            self.access(node.buffer, list(node.indices), write=True)
        elif kind == "IfThenElse":
            self.expr(node.condition)
            with self.assuming(node.condition):
                self.stmt(node.then_case)
            if node.else_case is not None:
                with self.assuming(self._not(node.condition)):
                    self.stmt(node.else_case)
        elif kind == "Evaluate":
            self.expr(node.value)
        elif kind == "Bind":
            self.expr(node.value)
            self.bind(node.var, node.value)
        elif kind in ("AllocBuffer", "DeclBuffer"):
            raise UnsafeTir(f"{kind} is not allowed: allocate with the block's alloc_buffer")
        else:
            raise UnsafeTir(f"statement {kind} is not allowed")

    def _for(self, node: Any) -> None:
        from tvm.ir import Range

        if node.step is not None and _constant(node.step) != 1:
            raise UnsafeTir("loops must step by 1")
        if node.thread_binding is not None or int(node.kind) != 0:
            raise UnsafeTir("loops must be serial: kinds and bindings are the scheduler's")
        if len(node.annotations):
            raise UnsafeTir(f"loop {node.loop_var} carries annotations (pragmas link code)")
        for bound in (node.min, node.extent):
            self.expr(bound)
            self.index_safe(bound, f"loop {node.loop_var}")
        self.prove(node.extent >= 0, f"loop {node.loop_var} has a non-negative extent")
        self.analyzer.bind(node.loop_var, Range.from_min_extent(node.min, node.extent))
        self.stmt(node.body)

    def _block(self, realize: Any) -> None:
        block = realize.block
        if len(block.match_buffers):
            raise UnsafeTir(f"block {block.name_hint!r}: match_buffer is not allowed")
        for key, value in block.annotations.items():
            allowed = BLOCK_ANNOTATIONS.get(key)
            if allowed is None or not allowed(value):
                raise UnsafeTir(f"block {block.name_hint!r}: annotation {key!r} is not allowed")
        self.expr(realize.predicate)
        with ExitStack() as scope:
            scope.enter_context(self.assuming(realize.predicate))
            for iter_var, value in zip(block.iter_vars, realize.iter_values, strict=True):
                self.expr(value)
                self.index_safe(value, f"block {block.name_hint!r} binding")
                dom = iter_var.dom
                self.within(value, dom.min, dom.extent, f"block {block.name_hint!r} binding")
                self.analyzer.bind(iter_var.var, value)
            for buffer in block.alloc_buffers:
                self._allocate(buffer)
            self._declared_regions_are_inferred(block)
            self.regions.append((list(block.reads), list(block.writes)))
            try:
                if block.init is not None:
                    self.stmt(block.init)
                self.stmt(block.body)
            finally:
                self.regions.pop()

    def _declared_regions_are_inferred(self, block: Any) -> None:
        """Declared read/write regions no larger than those TVM infers from the body (the
        schedule rules size caches and loops from them; TVM's own may leave the buffer, as a
        padding stage's guarded reads do, and are trusted as they are for the catalog)."""
        from tvm.s_tir.analysis import get_sblock_read_write_region

        known = {buffer: buffer for buffer in self.objects}
        inferred_reads, inferred_writes = get_sblock_read_write_region(block, known)
        for declared, inferred in ((block.reads, inferred_reads), (block.writes, inferred_writes)):
            for region in declared:
                if hash(region.source) not in self.buffers:
                    raise UnsafeTir(f"block {block.name_hint!r} names an unknown buffer")
                if not any(self._covers(outer, region) for outer in inferred):
                    raise UnsafeTir(
                        f"block {block.name_hint!r}: a declared region of "
                        f"{region.source.name!r} is larger than what its body accesses"
                    )

    def _covers(self, outer: Any, inner: Any) -> bool:
        if not outer.source.same_as(inner.source):
            return False
        can_prove = self.analyzer.can_prove
        return all(
            can_prove(i.min >= o.min) and can_prove(i.min + i.extent <= o.min + o.extent)
            for i, o in zip(inner.region, outer.region, strict=False)
        )

    def _allocate(self, buffer: Any) -> None:
        import tvm

        _compact(buffer, "allocated buffer")
        if buffer.scope() not in ALLOC_SCOPES:
            raise UnsafeTir(f"allocated buffer {buffer.name!r} has scope {buffer.scope()!r}")
        shape = _static_shape(buffer, "allocated buffer")
        self.allocated += math.prod(shape) * tvm.DataType(buffer.dtype).bits // 8
        if self.allocated > MAX_ALLOC_BYTES:
            raise UnsafeTir(f"internal allocations exceed {MAX_ALLOC_BYTES} bytes")
        self.buffers[hash(buffer)] = shape
        self.objects.append(buffer)


def check_user_function(func: Any) -> None:
    """Raise `UnsafeTir` unless ``func`` (an unscheduled PrimFunc) passes every rule above."""
    checker = _Checker(func)
    try:
        checker.stmt(func.body)
    except RecursionError:
        raise UnsafeTir("the function is nested too deeply") from None
