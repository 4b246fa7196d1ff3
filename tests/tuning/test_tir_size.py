"""The block count the service's cheap cap reads before any parse (`tuning.checks.tir_size`):
a function's TVMScript and its JSON count the same, a JSON spelling cannot hide a block, and
text that is not the format counts as nothing (the isolated parser says why)."""

from __future__ import annotations

import pytest

from tuning.catalog import list_operators
from tuning.catalog.workload import catalog_workload
from tuning.checks.tir_size import json_blocks, script_blocks, tir_blocks


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
        '{"type": "s_tir.SBlock", "type": "ir.IntImm"}',  # a key given twice: both are read
        '{"type": "s_tir.SBloc\\u006b"}',  # an escape, which TVM's reader decodes too
        '{"type_key": "tir.Block"}',  # an old document, which TVM upgrades
        '{"type": "s_tir.SBlockRealize"}',  # not a block
    ]
    assert json_blocks('{"root": 0, "nodes": [' + ", ".join(nodes) + "]}") == 3


@pytest.mark.parametrize(
    ("fmt", "source"),
    [("tvmscript", "def f(:"), ("tvmscript", "x = " + "-" * 20_000 + "1"),
     ("json", '{"nodes": ['), ("json", "[" * 100_000), ("onnx", "{}")],
)  # fmt: skip
def test_text_that_is_not_its_format_counts_as_nothing(fmt: str, source: str) -> None:
    assert tir_blocks(fmt, source) is None
