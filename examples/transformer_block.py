"""Tune a transformer encoder block through tunehub, then build and run it with the tuned
schedules.

A BERT-style post-norm encoder layer (multi-head self-attention, then a GELU feed-forward,
each with a residual and a LayerNorm), built by hand as an ONNX file with random weights; the
walk-through (submit, wait, build with `service.client.relax_build.build`, check, time) is
`cnn.run_example`. Small by default (sequence 16, width 64, 4 heads) so it tunes quickly.

    make run                                  # in another terminal: a server with a worker
    .venv/bin/python examples/transformer_block.py [--server URL] [--trials 64] [--target host]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cnn import parse_args, run_example  # noqa: E402


def encoder_layer(
    seq: int = 16, dim: int = 64, heads: int = 4, ffn: int = 256, seed: int = 0
) -> onnx.ModelProto:
    """One encoder layer on an input "x" of 1 x ``seq`` x ``dim`` (BERT-base: 128, 768, 12,
    3072): y = LN(h + FFN(h)), h = LN(x + Attention(x))."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(name: str, *shape: int) -> str:
        return const(name, (rng.standard_normal(shape) / np.sqrt(shape[0])).astype("float32"))

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def dense(x: str, name: str, n_in: int, n_out: int) -> str:
        y = node("MatMul", [x, weight(f"{name}.w", n_in, n_out)], f"{name}.mm")
        return node("Add", [y, const(f"{name}.b", np.zeros(n_out, "float32"))], name)

    def norm(x: str, name: str) -> str:
        scale, bias = np.ones(dim, "float32"), np.zeros(dim, "float32")
        return node("LayerNormalization", [x, const(f"{name}.g", scale),
                                           const(f"{name}.b", bias)], name, axis=-1)  # fmt: skip

    head = dim // heads
    split = const("split_heads", np.array([1, seq, heads, head], "int64"))
    merge = const("merge_heads", np.array([1, seq, dim], "int64"))
    q, k, v = (
        node(
            "Transpose",
            [node("Reshape", [dense("x", n, dim, dim), split], f"{n}.heads")],
            f"{n}.t",
            perm=perm,
        )  # fmt: skip
        for n, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3]))
    )
    scale = const("scale", np.array(1 / np.sqrt(head), "float32"))
    scores = node("Mul", [node("MatMul", [q, k], "qk"), scale], "scores")
    context = node("MatMul", [node("Softmax", [scores], "probs", axis=-1), v], "context")
    merged = node("Reshape", [node("Transpose", [context], "ctx.t", perm=[0, 2, 1, 3]), merge],
                  "ctx")  # fmt: skip
    h = norm(node("Add", ["x", dense(merged, "attn_out", dim, dim)], "res1"), "ln1")
    inner = node("Gelu", [dense(h, "ffn_in", dim, ffn)], "gelu")
    y = norm(node("Add", [h, dense(inner, "ffn_out", ffn, dim)], "res2"), "y")
    graph = helper.make_graph(
        nodes,
        "encoder_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, seq, dim])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    args = parse_args(__doc__.splitlines()[0])
    sys.exit(run_example(encoder_layer(), [1, 16, 64], args))
