"""How many blocks a TIR function a user sends declares, counted on its text before any parse
(standard library only): what the service's cheap cap on a parse's size reads
(`service.app.untrusted_input`). A parse costs a fixed ~1.8 s and ~4 ms per block more.

* TVMScript: each ``with`` item whose context is a call of an attribute named ``sblock`` or
  ``block`` (``T.sblock("b")``), and each function's root block, written or not. TVMScript
  refuses a block under another name (an alias, a macro), so the count is the function's.
* TVM JSON: each node whose ``type`` (``type_key`` in older documents) names a block, the
  root block included, however the document spells the string, once per key even where an
  object repeats it.

The two agree on a function: its TVMScript and its JSON count the same.

None where the text does not read as Python or JSON: the isolated parser says why.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

BLOCK_CALLS = frozenset({"sblock", "block"})
BLOCK_TYPE = re.compile(r"(?:^|\.)S?Block$")  # s_tir.SBlock, tirx.SBlock, tir.Block
TYPE_KEYS = frozenset({"type", "type_key"})


def script_blocks(source: str) -> int | None:
    """The blocks of TVMScript ``source``, or None when it is not Python."""
    try:
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


def json_blocks(source: str) -> int | None:
    """The block nodes of TVM JSON ``source``, or None when it is not JSON."""
    count = 0

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal count
        for key, value in items:
            if key in TYPE_KEYS and isinstance(value, str) and BLOCK_TYPE.search(value):
                count += 1
        return {}  # nothing is kept: only the count is wanted

    try:
        json.loads(source, object_pairs_hook=pairs)
    except (ValueError, RecursionError, MemoryError):
        return None
    return count


def tir_blocks(fmt: str, source: str) -> int | None:
    """The blocks of ``source`` in ``fmt`` ("tvmscript" or "json"); None when it cannot be read
    as that format, or the format is unknown."""
    if fmt == "tvmscript":
        return script_blocks(source)
    if fmt == "json":
        return json_blocks(source)
    return None
