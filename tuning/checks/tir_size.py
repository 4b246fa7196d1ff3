"""How many blocks a TIR function a user sends declares, counted on its text before any parse
(standard library only): what the service's cheap cap on a parse's size reads
(`service.app.untrusted_input`). A parse costs a fixed ~1.8 s and ~4 ms per block more.

* TVMScript: each ``with`` item whose context is a call of an attribute named ``sblock`` or
  ``block`` (``T.sblock("b")``), and each function's root block, written or not. TVMScript
  refuses a block under another name (an alias, a macro), so the count is the function's.
* TVM JSON: the copies of block nodes (``type``, or ``type_key`` in older documents, naming a
  block, the root block included, however the document spells the string; an object that
  names one under any of its type keys is one) that TVM's loader builds from the root. Its
  graph format lets any node be referenced many times, and each reference is one more copy in
  the function (one block under a loop referenced 64 times is 64 blocks to check and
  re-derive), so the count is of the paths from ``root_index`` to block nodes, computed once
  per node and bounded by `MAX_COUNTED`. Which numbers are references is read as the loader
  reads them: every one in ``data``, except the fields TVM reads as integers
  (`LITERAL_FIELDS`) and the data of nodes that hold a value (`VALUE_NODES`); a number taken
  for a reference that is not one can only add to the count, and references that loop count
  as `MAX_COUNTED` (TVM's loader never finishes a loop; a false one could hide real paths).

The two agree on a function: its TVMScript and its JSON count the same.

None where the text does not read as Python or JSON: the isolated parser says why.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

BLOCK_CALLS = frozenset({"sblock", "block"})
BLOCK_TYPE = re.compile(r"(?:^|\.)S?Block$")  # s_tir.SBlock, tirx.SBlock, tir.Block
TYPE_KEYS = frozenset({"type", "type_key"})
MAX_COUNTED = 1 << 20  # a count stops growing here: far past any cap, and its sums stay small
# Nodes whose ``data`` is a value, never a reference (tvm_ffi's serialization.cc).
VALUE_NODES = frozenset(
    {"None", "bool", "int", "float", "DataType", "Device", "ffi.String", "ffi.Bytes", "ffi.Shape"}
)
# The integer fields (read as numbers, not references) of the types a TIR function may hold:
# every ir., te. and tirx. type's and its signature's, as TVM's reflection declares them
# (tests/tuning/test_tir_size.py checks the table against it both ways).
LITERAL_FIELDS: dict[str, frozenset[str]] = {
    key: frozenset(fields.split())
    for key, fields in {
        "ir.Span": "line column end_line end_column",
        "ir.SequentialSpan": "line column end_line end_column",
        "ir.Op": "num_inputs support_level",
        "ir.TupleGetItem": "index",
        "relax.ShapeType": "ndim",
        "relax.TensorType": "ndim",
        "relax.VDevice": "vdevice_id",
        "te.Reduce": "value_index",
        "te.Tensor": "value_index",
        "tirx.BufferType": "data_alignment offset_factor",
        "tirx.For": "kind",
        "tirx.IterVar": "iter_type",
        "tirx.ExecScope": "kind",
        "tirx.ScopeIdDef": "scope",
        "tirx.ComposeLayout": "atom_len inner_mask outer_mask per_element swizzle_len",
        "tirx.TensorMapEncodeTiledAttr": "force_cu_dtype interleave l2_promotion oob_fill rank "
        "swizzle",
        "tirx.transform.RemoveNoOpConfig": "max_simplification_steps",
        "tirx.transform.UnrollLoopConfig": "auto_max_depth auto_max_extent auto_max_step "
        "explicit_unroll unroll_local_access",
    }.items()
}


# CPython 3.11 builds the Python AST with a recursion counter shared by the interpreter: two
# threads parsing at once (the API's threadpool under a flood of TIR uploads) raised
# "SystemError: AST constructor recursion depth mismatch", a 500. One parse at a time (a few ms).
_AST_LOCK = threading.Lock()


def script_blocks(source: str) -> int | None:
    """The blocks of TVMScript ``source``, or None when it is not Python."""
    try:
        with _AST_LOCK:
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls = [
        item.context_expr
        for node in ast.walk(tree)
        if isinstance(node, (ast.With, ast.AsyncWith))
        for item in node.items
        if _calls_block(item.context_expr)
    ]
    functions = sum(isinstance(node, ast.FunctionDef) for node in ast.walk(tree))
    written_roots = sum(_names_root(call) for call in calls)
    return len(calls) + functions - min(written_roots, functions)


def _calls_block(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in BLOCK_CALLS
    )


def _names_root(call: ast.expr) -> bool:
    assert isinstance(call, ast.Call)
    first = call.args[0] if call.args else None
    return isinstance(first, ast.Constant) and first.value == "root"


class _Object(dict[str, Any]):
    """A JSON object, and whether any of its type keys names a block (a key given twice is
    kept once, as TVM's loader keeps it, but both are read here)."""

    def __init__(self, items: list[tuple[str, Any]]) -> None:
        super().__init__(items)
        self.names_block = any(
            key in TYPE_KEYS and isinstance(value, str) and BLOCK_TYPE.search(value) is not None
            for key, value in items
        )


def json_blocks(source: str) -> int | None:
    """The copies of block nodes TVM JSON ``source`` holds (see the module docstring), at most
    `MAX_COUNTED`; None when it is not JSON. A document that is not a graph (TVM refuses it)
    counts each object naming a block once."""
    try:
        document = json.loads(source, object_pairs_hook=_Object)
    except (ValueError, RecursionError, MemoryError):
        return None
    if isinstance(document, dict):
        nodes, root = document.get("nodes"), document.get("root_index")
        if isinstance(nodes, list) and isinstance(root, int) and 0 <= root < len(nodes):
            return _paths_to_blocks(nodes, root)
    blocks = sum(isinstance(o, _Object) and o.names_block for o in _values(document))
    return min(MAX_COUNTED, blocks)


def _values(value: Any) -> Iterator[Any]:
    """``value`` and everything inside it, without recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        yield item
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())


def _references(node: Any, count: int) -> list[int]:
    """The node indices (below ``count``) that TVM's loader may follow from ``node``: every
    number in its ``data`` (booleans too: the loader reads true as 1), less `LITERAL_FIELDS`,
    none for `VALUE_NODES`."""
    if not isinstance(node, dict):
        return []
    kind, data = node.get("type"), node.get("data")
    kind = kind if isinstance(kind, str) else ""
    if kind in VALUE_NODES:
        return []
    if isinstance(data, dict):
        literal = LITERAL_FIELDS.get(kind, frozenset())
        data = [value for key, value in data.items() if key not in literal]
    return [int(v) for v in _values(data) if isinstance(v, int) and 0 <= v < count]


def _paths_to_blocks(nodes: list[Any], root: int) -> int:
    """How many paths lead from ``root`` to a block node (one that names a block counts
    itself), each node's count computed once (depth first, without recursion) and bounded by
    `MAX_COUNTED`. A reference back to a node being counted is `MAX_COUNTED`: a loop TVM's
    loader never finishes, or a number read as a reference that is not one, which could cut
    real paths short were it skipped (refused rather than counted short)."""
    state = bytearray(len(nodes))  # 0: not reached, 1: being counted, 2: counted
    counts = [0] * len(nodes)
    children: dict[int, list[int]] = {}

    def enter(index: int) -> None:
        state[index] = 1
        node = nodes[index]
        counts[index] = int(isinstance(node, _Object) and node.names_block)
        children[index] = _references(node, len(nodes))

    enter(root)
    stack = [(root, 0)]
    while stack:
        index, position = stack[-1]
        refs = children[index]
        while position < len(refs) and state[refs[position]] == 2:
            counts[index] = min(MAX_COUNTED, counts[index] + counts[refs[position]])
            position += 1
        if position == len(refs):
            state[index] = 2
            del children[index]
            stack.pop()
        elif state[refs[position]] == 1:
            return MAX_COUNTED
        else:  # a node not reached yet: count it, then come back to add it
            stack[-1] = (index, position)
            enter(refs[position])
            stack.append((refs[position], 0))
    return counts[root]


def tir_blocks(fmt: str, source: str) -> int | None:
    """The blocks of ``source`` in ``fmt`` ("tvmscript" or "json"); None when it cannot be read
    as that format, or the format is unknown."""
    if fmt == "tvmscript":
        return script_blocks(source)
    if fmt == "json":
        return json_blocks(source)
    return None
