"""The block count the service's cheap cap reads before any parse (`tuning.checks.tir_size`):
a function's TVMScript and its JSON count the same, neither a JSON spelling nor a shared
reference can hide a block, and text that is not the format counts as nothing (the isolated
parser says why)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import TINY
from tuning.catalog import list_operators
from tuning.catalog.workload import catalog_workload
from tuning.checks.tir_size import (
    LITERAL_FIELDS,
    MAX_COUNTED,
    json_blocks,
    script_blocks,
    tir_blocks,
)


@pytest.mark.parametrize("name", ["matmul", "softmax", "conv2d_transpose", "layer_norm"])
def test_a_functions_script_and_json_count_the_same_blocks(name: str) -> None:
    (op,) = [op for op in list_operators() if op.name == name]
    spec = catalog_workload(op.name, op.Params(**op.example))
    script = spec.mod.script()
    blocks = script_blocks(script)
    assert blocks is not None and blocks >= 2  # a block and the root
    assert json_blocks(spec.mod_json) == blocks


WRITTEN_ROOT = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    with T.sblock("root"):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi]
"""


def test_a_written_root_block_is_counted_once() -> None:
    import tvm
    from tvm.script.parser.core.entry import _default_globals, parse

    source = WRITTEN_ROOT.replace("from tvm.script import tirx as T", "")
    module = parse(source, extra_vars={"T": _default_globals()["T"]})  # as the parse child
    assert script_blocks(WRITTEN_ROOT) == json_blocks(tvm.ir.save_json(module)) == 2


def test_every_block_spelling_of_tvm_json_is_counted() -> None:
    nodes = [
        '{"type": "ffi.Array", "data": [1, 2, 3, 4]}',  # the root
        '{"type": "s_tir.SBlock", "type": "ir.IntImm"}',  # a key given twice: both are read
        '{"type": "s_tir.SBloc\\u006b"}',  # an escape, which TVM's reader decodes too
        '{"type_key": "tir.Block"}',  # an old document's spelling
        '{"type": "s_tir.SBlockRealize"}',  # not a block
    ]
    listed = '"nodes": [' + ", ".join(nodes) + "]"
    assert json_blocks('{"root_index": 0, ' + listed + "}") == 3
    assert json_blocks('{"root": 0, ' + listed + "}") == 3  # no graph: each object once


def _matmul_graph() -> tuple[dict[str, Any], int, int]:
    """The JSON graph of a tiny matmul (its block and the root), the index of the block's
    realize and of the loop around it."""
    (matmul,) = [op for op in list_operators() if op.name == "matmul"]
    graph = json.loads(catalog_workload("matmul", matmul.Params(**TINY)).mod_json)
    nodes = graph["nodes"]
    realize = next(i for i, n in enumerate(nodes) if n["type"] == "s_tir.SBlockRealize")
    (loop,) = [
        i for i, n in enumerate(nodes) if n["type"] == "tirx.For" and n["data"]["body"] == realize
    ]
    return graph, realize, loop


def test_a_block_node_referenced_many_times_counts_each_time() -> None:
    """The review's case: TVM's JSON graph shares a node wherever it is referenced, so one
    block node referenced 50 times loads as 50 blocks (what the parser then checks, re-derives
    and prints); counting block nodes said 2, under any cap."""
    import tvm

    graph, realize, loop = _matmul_graph()
    nodes = graph["nodes"]
    nodes.append({"type": "ffi.Array", "data": [realize] * 50})
    nodes.append({"type": "tirx.SeqStmt", "data": {"span": 0, "seq": len(nodes) - 1}})
    nodes[loop]["data"]["body"] = len(nodes) - 1
    crafted = json.dumps(graph)
    assert sum('"s_tir.SBlock"' in json.dumps(n) for n in nodes) == 2  # two block nodes
    printed = tvm.ir.load_json(crafted).script()  # what TVM builds of it
    assert json_blocks(crafted) == script_blocks(printed) == 51


def test_shared_references_are_counted_within_bounds() -> None:
    """30 arrays each referencing the next twice reach one block 2**30 times: counted once per
    node, saturated at MAX_COUNTED. A block node nothing reaches is not loaded, so not counted;
    references that loop (a key TVM ignores can fake one) are MAX_COUNTED, never skipped."""
    nodes: list[dict[str, Any]] = [{"type": "ffi.Array", "data": [i + 1, i + 1]} for i in range(30)]
    nodes += [{"type": "s_tir.SBlock", "data": {}}, {"type": "s_tir.SBlock", "data": {}}]
    assert json_blocks(json.dumps({"root_index": 0, "nodes": nodes})) == MAX_COUNTED
    assert json_blocks(json.dumps({"root_index": 28, "nodes": nodes})) == 4  # 31 unreached
    nodes[30]["data"] = {"ignored": 29}  # a number TVM's loader never reads, looping back
    assert json_blocks(json.dumps({"root_index": 28, "nodes": nodes})) == MAX_COUNTED


def test_literal_fields_are_the_integer_fields_tvm_declares() -> None:
    """`LITERAL_FIELDS` never hides a reference (each is an integer field of its type), and
    covers every integer field of the ir., te. and tirx. types (an honest function's numbers
    are never taken for references)."""
    import tvm  # noqa: F401  (registers TVM's types)
    from tvm_ffi import core
    from tvm_ffi.registry import get_registered_type_keys

    def int_fields(key: str) -> set[str]:
        info: Any = core._lookup_or_register_type_info_from_type_key(str(key))
        names: set[str] = set()
        while info is not None:
            names |= {f.name for f in info.fields if f.field_static_type_index == 1}  # int
            info = info.parent_type_info
        return names

    declared = {
        key: fields
        for key in get_registered_type_keys()
        if key.startswith(("ir.", "te.", "tirx.")) and (fields := int_fields(key))
    }
    for key, literal in LITERAL_FIELDS.items():
        assert literal <= int_fields(key), key
    assert {k: set(v) for k, v in LITERAL_FIELDS.items() if k in declared} == declared


@pytest.mark.parametrize(
    ("fmt", "source"),
    [("tvmscript", "def f(:"), ("tvmscript", "x = " + "-" * 20_000 + "1"),
     ("json", '{"nodes": ['), ("json", "[" * 100_000), ("onnx", "{}")],
)  # fmt: skip
def test_text_that_is_not_its_format_counts_as_nothing(fmt: str, source: str) -> None:
    assert tir_blocks(fmt, source) is None
