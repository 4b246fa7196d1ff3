"""The trace gate: every trace the service's own search spaces write passes it (on CPU, in both
spaces, and on CUDA with tensor cores), and what the security probe and TVM's dangerous
corners put in a trace does not."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.security.payloads import annotated_trace, probe_trace
from tuning.checks.trace_gate import TENSOR_INTRINSICS, UnsafeTrace, check_trace, check_trace_text

# A spread of the catalog: contractions (plain, packed, int8, fp16), both conv layouts,
# depthwise, a reduction and a pool.
SAMPLED = [
    ("matmul", {"M": 32, "N": 32, "K": 32}),
    ("matmul", {"M": 64, "N": 64, "K": 64, "dtype": "float16"}),
    ("dense", {"M": 16, "N": 64, "K": 64, "dtype": "int8"}),
    ("dense", {"M": 3, "N": 5, "K": 4, "bias": True}),
    ("conv2d", {"N": 1, "C": 4, "H": 9, "W": 8, "K": 6, "R": 3, "S": 3, "padding": 1}),
    ("conv2d", {"N": 1, "C": 4, "H": 9, "W": 8, "K": 6, "R": 3, "S": 3, "layout": "NHWC"}),
    ("depthwise_conv2d", {"N": 1, "C": 4, "H": 8, "W": 8, "R": 3, "S": 3, "padding": 1}),
    ("softmax", {"rows": 4, "cols": 32}),
    ("max_pool2d", {"N": 1, "C": 3, "H": 8, "W": 7, "R": 3, "S": 3, "stride": 2}),
]
CUDA = {
    "kind": "cuda",
    "arch": "sm_80",
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 49152,
    "thread_warp_size": 32,
    "registers_per_block": 65536,
}


CUDA_SAMPLED = SAMPLED[:5]  # contractions (tensor cores: fp16, int8) and a convolution


def _workloads(spaces: tuple[str, ...]) -> list[tuple[Any, tuple[int, ...]]]:
    """(module, weights) of `SAMPLED` (on CUDA: its contractions and first convolution), and
    with the packed space the tiny CNN's tasks (a model's fused functions: int64 shapes, bias
    folded into the weights' layout)."""
    import tvm

    from tests.tuning.model_cases import tiny_cnn
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.targets import resolve_target
    from tuning.ir import layout_free_operands
    from tuning.models.frontends import relax_module
    from tuning.models.inputs import ModelInput
    from tuning.models.pipeline import extract, tuning_pipeline

    found = []
    for name, params in SAMPLED if "packed" in spaces else CUDA_SAMPLED:
        op = get_operator(name)
        found.append((catalog_workload(name, op.Params(**params)).mod, op.constant_operands))
    if "packed" in spaces:
        target = tvm.target.Target(resolve_target("host").canonical)
        inputs = [ModelInput("x", (1, 3, 16, 16), "float32")]
        model = relax_module("onnx", tiny_cnn().SerializeToString(), inputs)
        for task in extract(tuning_pipeline(model, target), target):
            found.append((task.mod, layout_free_operands(task.mod)))
    return found


def _space_traces(canonical: dict[str, Any], spaces: tuple[str, ...]) -> list[Any]:
    """Every design space of `_workloads` on the target, sampled and postprocessed, as the
    search stores its candidates' traces."""
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext

    from tuning.hardware.intrinsics import load_tensor_intrinsics
    from tuning.search.spaces import PACKED, space_generator, space_module
    from tuning.traces import plain_json

    load_tensor_intrinsics([canonical])
    target = tvm.target.Target(canonical)
    traces = []
    for workload, weights in _workloads(spaces):
        for space in spaces:
            if space == PACKED and not weights:
                continue
            mod = space_module(workload, space, weights)
            context = TuneContext(
                mod=mod, target=target, space_generator=space_generator(space, target, mod),
                num_threads=1, rand_state=1,
            ).clone()  # fmt: skip
            for sch in context.generate_design_space():
                sch = sch.copy()
                sch.enter_postproc()
                if all(p.apply(sch) for p in context.space_generator.postprocs):
                    traces.append(plain_json(sch.trace.as_json(remove_postproc=False)))
    return traces


@pytest.mark.parametrize(
    ("target", "spaces"),
    [("host", ("plain", "packed")), ("cuda", ("plain",))],
)
def test_every_trace_the_search_spaces_write_passes(target: str, spaces: tuple[str, ...]) -> None:
    from tuning.hardware.targets import resolve_target

    canonical = resolve_target("host").canonical if target == "host" else CUDA
    traces = _space_traces(canonical, spaces)
    assert len(traces) >= len(SAMPLED if target == "host" else CUDA_SAMPLED)
    kinds = set()
    for trace in traces:
        check_trace(json.loads(json.dumps(trace)))  # as stored: JSON text and back
        kinds |= {instruction[0] for instruction in trace[0]}
    if target == "cuda":  # tensor cores: tensorize, layout transforms, pipelines
        assert {"Tensorize", "TransformBlockLayout", "Bind"} <= kinds
    else:  # the packed space's RewriteLayout and the parallel/vectorise postprocessor
        assert {"TransformLayout", "Parallel", "Vectorize"} <= kinds


def test_the_allowed_tensor_intrinsics_are_tvms_own() -> None:
    from tvm.s_tir import TensorIntrin

    from tuning.hardware.amx import PREFIX, register_named_amx_intrinsics
    from tuning.hardware.intrinsics import load_tensor_intrinsics

    load_tensor_intrinsics([{"kind": "llvm"}, {"kind": "cuda"}])
    for name in TENSOR_INTRINSICS:
        if name.startswith(PREFIX):  # tunehub's AMX blocks, registered when a trace names one
            continue
        assert TensorIntrin.get(name) is not None, name
    # Every AMX block shape, at the shortest and longest k block (all are in test_amx_tiles).
    for name in ("16x16x32", "16x32x4096", "32x16x32", "32x32x4096"):
        assert PREFIX + name in TENSOR_INTRINSICS
        register_named_amx_intrinsics(PREFIX + name)
        assert TensorIntrin.get(PREFIX + name) is not None, name


def test_the_probes_trace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeTrace, match="pragma_import_llvm"):
        check_trace(probe_trace(tmp_path / "marker"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pragma_import_c", 'int x = system("id");'),  # pasted into C/CUDA source
        ("pragma_import_llvm", "/etc/passwd.ll"),  # a file of the worker's, linked in
        ("pragma_aarch64_pstate_sm", "streaming"),
        ("pragma_debug_skip_region", "1"),
        ("meta_schedule.unroll_explicit", "16; system"),  # a key it knows, a value it never takes
        ("meta_schedule.auto_tensorize", "arm_dot_4x4_i8_sdot"),  # TVM's, for another target
    ],
)
def test_annotations_the_search_never_writes_are_refused(key: str, value: str) -> None:
    with pytest.raises(UnsafeTrace):
        check_trace(annotated_trace(key, value))


def _search_trace() -> list[Any]:
    """A trace of the search's own: a split, a parallel and a vectorised loop."""
    return [
        [
            ["GetSBlock", [], ["B", "main"], ["b0"]],
            ["GetLoops", ["b0"], [], ["l1"]],
            ["SamplePerfectTile", ["l1"], [2, 64], ["v2", "v3"]],
            ["Split", ["l1", "v2", "v3"], [True, False], ["l4", "l5"]],
            ["Parallel", ["l4"], [], []],
            ["Vectorize", ["l5"], [], []],
            ["Annotate", ["b0", 16], ["meta_schedule.parallel"], []],
        ],
        [[2, [2, 8]]],
    ]


def _index_map_with(node: dict[str, Any]) -> str:
    """An IndexMap's JSON graph whose final index is ``node`` (an attacker's expression)."""
    return json.dumps(
        {
            "root_index": 5,
            "nodes": [
                {"type": "None"},
                {"type": "ir.PrimType", "data": {"span": 0, "dtype": "int32"}},
                {"type": "ffi.String", "data": "i"},
                {"type": "ir.Var", "data": {"span": 0, "ty": 1, "name": 2}},
                {"type": "ffi.Array", "data": [3]},
                {"type": "tirx.IndexMap",
                 "data": {"initial_indices": 4, "final_indices": 7, "inverse_index_map": 0}},
                node,
                {"type": "ffi.Array", "data": [6]},
            ],
            "metadata": {"tvm_version": "0.27.0.post1"},
        }
    )  # fmt: skip


def _with(trace: list[Any], index: int, instruction: list[Any]) -> list[Any]:
    changed = copy.deepcopy(trace)
    changed[0][index] = instruction
    return changed


CALL = {"type": "ir.Call", "data": {"op": 0, "args": 0}}
REFUSED = {
    "unknown kind": _with(_search_trace(), 4, ["UnsafeSetDType", ["b0"], [0, "float64"], []]),
    "hidden accesses": _with(
        _search_trace(), 4, ["UnsafeHideBufferAccess", ["b0", '"read"', [0]], [], []]
    ),
    "a call in an index map": _with(
        _search_trace(),
        4,
        ["TransformLayout", ["b0", _index_map_with(CALL), None], [0, 0, None, True], []],
    ),
    "a pad value": _with(
        _search_trace(),
        4,
        [
            "TransformLayout",
            ["b0", _index_map_with({"type": "int", "data": 1})],
            [0, 0, _index_map_with({"type": "int", "data": 0}), False],
            [],
        ],
    ),  # fmt: skip
    "a foreign scope": _with(_search_trace(), 4, ["SetScope", ["b0"], [0, "global.texture"], []]),
    "a foreign intrinsic": _with(
        _search_trace(), 4, ["Tensorize", ["l5"], ["arm_dot_4x4_i8_neon", True], []]
    ),
    "a thread tag": _with(_search_trace(), 4, ["Bind", ["l4"], ["warp.x"], []]),
    "an object input": _with(_search_trace(), 4, ["Parallel", [{"op": "x"}], [], []]),
    "a string literal input": _with(_search_trace(), 4, ["Parallel", ['"l4"'], [], []]),
    "a block name with code": _with(
        _search_trace(), 0, ["GetSBlock", [], ["B; import os", "main"], ["b0"]]
    ),
    "a huge tile": _with(
        _search_trace(), 2, ["SamplePerfectTile", ["l1"], [2, 1 << 40], ["v2", "v3"]]
    ),
    "text as a decision": [_search_trace()[0], [[2, "system"]]],
    "a decision of no instruction": [_search_trace()[0], [[99, [2, 8]]]],
    "not a trace": {"insts": []},
}


def test_a_trace_of_the_search_passes() -> None:
    check_trace(_search_trace())
    assert check_trace_text(json.dumps(_search_trace())) == _search_trace()


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_search_never_writes_is_refused(case: str) -> None:
    with pytest.raises(UnsafeTrace):
        check_trace(REFUSED[case])
    with pytest.raises(UnsafeTrace):
        check_trace_text(json.dumps(REFUSED[case]))
