"""The one gate every MetaSchedule trace passes before it is replayed, built or loaded.

A trace is a program over a workload: replayed, it becomes the scheduled module that is
compiled and whose library is loaded. Most of what it can say is harmless scheduling (split,
reorder, cache, parallelise), but a few things reach the code generator: a loop annotated with
``pragma_import_llvm`` links the LLVM IR text it carries (inline assembly, a constructor: code
run as soon as the library is loaded), ``pragma_import_c`` C source, a layout transform's index
map could carry any expression (``call_extern`` among them) into every index of a buffer.

So a trace is checked as plain JSON (MetaSchedule's form, `tuning.traces`), with no TVM
and before anything parses it, against an allow-list of what the service's own search spaces
produce (`tests/tuning/test_trace_gate.py` replays every catalog space on CPU and CUDA targets
through it):

* every instruction's kind is one of `INSTRUCTIONS`;
* an ``Annotate``/``Unannotate`` key is one of `ANNOTATIONS`, and its value is of the kind
  that key takes (an integer, a sampled variable, a tiling structure, a tensor intrinsic's
  name, a list of pipeline stages): no ``pragma_*`` but the unroll pragmas the search's own
  postprocessor writes, no file names, no source text;
* a string attribute is what its instruction takes (a block or function name, a storage scope
  of `SCOPES`, a thread axis of `THREAD_AXES`, a tensor intrinsic's name), never free text;
* an index map (``TransformLayout``, ``TransformBlockLayout``) holds only integer variables,
  integer constants, ``+ - * // %``, ``min``, ``max`` and casts between integer types:
  `INDEX_MAP_NODES`;
* sizes are bounded (`MAX_INSTRUCTIONS`, `MAX_TEXT`).

Callers: the import (`service.app.usecases.import_database`, a 422 naming the line), the
worker before it replays a stored trace (`tuning.publish.verify.apply_trace`, the store's
MetaSchedule database), the search's own candidates before they are built
(`tuning.search.fresh_candidates`), the jailed replays (`tuning.untrusted`), and a build's
`TunehubDatabase` before it replays what the service answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

MAX_INSTRUCTIONS = 20_000
MAX_TEXT = 1 << 20  # characters of a trace's JSON text
MAX_INDEX_MAP_NODES = 4096

INSTRUCTIONS = frozenset(
    {
        # Reads of the schedule's state.
        "GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers",
        # Loop transformations.
        "Split", "Fuse", "Reorder", "Parallel", "Vectorize", "Bind", "Unroll", "AddUnitLoop",
        # Block transformations and caches.
        "CacheRead", "CacheWrite", "ReadAt", "WriteAt", "ReIndex", "SetScope", "StorageAlign",
        "ComputeAt", "ReverseComputeAt", "ComputeInline", "ReverseComputeInline",
        "DecomposeReduction", "RFactor", "Blockize", "Tensorize", "PadEinsum", "TransformLayout",
        "TransformBlockLayout",
        # Sampling (the decisions the search mutates) and bookkeeping.
        "SamplePerfectTile", "SamplePartitionedTile", "SampleCategorical",
        "SampleComputeLocation", "Annotate", "Unannotate", "EnterPostproc",
    }
)  # fmt: skip

_RV = re.compile(r"^[blv]\d{1,7}$")  # a block, loop or expression random variable
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,255}$")  # a block, function or intrinsic name
_STRUCTURE = re.compile(r'^"[SRsr]{1,16}"$')  # a multi-level tiling structure, quoted

MAX_INTEGER = (1 << 31) - 1  # every integer of a trace fits int32 (extents, tiles, steps)
SCOPES = frozenset(
    {"global", "local", "shared", "shared.dyn", "wmma.matrix_a", "wmma.matrix_b",
     "wmma.accumulator", "m16n8k8.matrixA", "m16n8k8.matrixB", "m16n8k8.matrixC"}
)  # fmt: skip
# The tensor intrinsics MetaSchedule's default CPU and CUDA rules tensorize with (TVM's
# registry holds more, for other targets, whose bodies call other builtins), and tunehub's
# AVX512-BF16 dot product (`tuning.hardware.bf16.DOT_16x2`) and AMX tile blocks
# (`tuning.hardware.amx`: every block and k block it can register), floors this one may not
# import: their bodies are tunehub's, not the trace's.
TENSOR_INTRINSICS = frozenset(
    {"dot_16x4_vnni", "dot_16x4_avx512", "tunehub_avx512bf16_dot_16x2"}
    | {f"tunehub_amx_bf16_{r}x{c}x{k}" for r in (16, 32) for c in (16, 32)
       for k in range(32, 4097, 32)}
    | {f"wmma_fill_16x16x16_{t}" for t in ("f32", "f16", "s32")}
    | {f"wmma_load_16x16x16_{t}_{m}_shared_dyn" for t in ("f16", "s8")
       for m in ("a", "b", "b_trans")}
    | {f"wmma_sync_16x16x16_{t}{tr}" for t in ("f16f16f32", "f16f16f16", "s8s8s32")
       for tr in ("", "_trans")}
    | {f"wmma_store_16x16x16_{t}_shared_dyn" for t in ("f32", "f16", "s32")}
    | {f"mma_init_m16n8k8_{t}" for t in ("f16", "f32")}
    | {f"mma_load_m16n8k8_f16_{m}_shared_dyn" for m in ("A", "B")}
    | {f"mma_sync_m16n8k8_f16f16{t}" for t in ("f16", "f32")}
    | {f"mma_store_m16n8k8_{t}_global" for t in ("f16", "f32")}
)  # fmt: skip
THREAD_AXES = frozenset(
    f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx", "vthread") for axis in "xyz"
)
INDEX_MAP_NODES = frozenset(
    {"None", "int", "ir.PrimType", "ffi.String", "ffi.Array", "ir.Var", "ir.IntImm",
     "tirx.IndexMap", "prim.Add", "prim.Sub", "prim.Mul", "prim.FloorDiv", "prim.FloorMod",
     "prim.Min", "prim.Max", "prim.Cast"}
)  # fmt: skip
INDEX_DTYPES = frozenset({"int32", "int64"})


class UnsafeTrace(ValueError):
    """A trace the service will not replay, build or load (the message says where and why)."""


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INTEGER


def _int_or_rv(value: Any) -> bool:
    return _integer(value) or (isinstance(value, str) and bool(_RV.match(value)))


def _quoted(allowed: frozenset[str]) -> Callable[[Any], bool]:
    """A validator of a string literal (quoted, as traces write them) that is one of these."""

    def check(value: Any) -> bool:
        return (
            isinstance(value, str)
            and len(value) >= 2
            and value[0] == value[-1] == '"'
            and (value[1:-1] in allowed)
        )

    return check


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= 64 and all(map(_integer, value))


# Annotation key -> the values it may take (Annotate's second input; Unannotate has none).
ANNOTATIONS: dict[str, Callable[[Any], bool]] = {
    "meta_schedule.parallel": _int_or_rv,
    "meta_schedule.vectorize": _int_or_rv,
    "meta_schedule.unroll_explicit": _int_or_rv,
    "meta_schedule.unroll_implicit": _int_or_rv,
    "meta_schedule.cooperative_fetch": _int_or_rv,
    "meta_schedule.random_compute_producer": _int_or_rv,
    "meta_schedule.thread_extent_low_inclusive": _integer,
    "meta_schedule.thread_extent_high_inclusive": _integer,
    "meta_schedule.layout_rewrite_preproc": lambda v: isinstance(v, (bool, int)),
    "meta_schedule.tiling_structure": lambda v: isinstance(v, str) and bool(_STRUCTURE.match(v)),
    "meta_schedule.auto_tensorize": _quoted(TENSOR_INTRINSICS | {""}),
    "meta_schedule.auto_tensorize_init": _quoted(TENSOR_INTRINSICS),
    # The two pragmas the search's own postprocessor writes (every other ``pragma_*`` reaches
    # the code generator: ``pragma_import_llvm`` links LLVM text, ``pragma_import_c`` pastes C).
    "pragma_auto_unroll_max_step": _int_or_rv,
    "pragma_unroll_explicit": _int_or_rv,
    "software_pipeline_stage": _int_list,
    "software_pipeline_order": _int_list,
    "software_pipeline_async_stages": _int_list,
    "warp_execution": _integer,
    "vector_bytes": _integer,
    "local_stage": _integer,
    "double_buffer_scope": _integer,
    "tirx.manifest_shared_memory_local_stage": _integer,
    "permuted_layout": _quoted(frozenset({"g2s_A", "g2s_B", "s2l_A", "s2l_B"})),
    "schedule_rule": _quoted(
        frozenset(
            f"meta_schedule.{n}"
            for n in ("pool_avg", "pool_max", "adaptive_pool_avg", "adaptive_pool_max")
        )
    ),  # fmt: skip
}


def check_trace(trace: Any) -> None:
    """Raise `UnsafeTrace` unless ``trace`` (``[instructions, decisions]`` as plain JSON, the
    form the store and the JSON database hold) passes every rule of the module."""
    if not (isinstance(trace, list) and len(trace) == 2):
        raise UnsafeTrace("a trace is [instructions, decisions]")
    instructions, decisions = trace
    if not isinstance(instructions, list) or not isinstance(decisions, list):
        raise UnsafeTrace("a trace is [instructions, decisions]")
    if len(instructions) > MAX_INSTRUCTIONS or len(decisions) > MAX_INSTRUCTIONS:
        raise UnsafeTrace(f"a trace has at most {MAX_INSTRUCTIONS} instructions")
    for number, instruction in enumerate(instructions):
        try:
            _check_instruction(instruction)
        except UnsafeTrace as err:
            raise UnsafeTrace(f"instruction {number}: {err}") from None
    for decision in decisions:
        if not (isinstance(decision, list) and len(decision) == 2 and _integer(decision[0])):
            raise UnsafeTrace("a decision is [instruction index, value]")
        if not 0 <= decision[0] < len(instructions) or not _plain_numbers(decision[1]):
            raise UnsafeTrace(f"decision of instruction {decision[0]} is not a sampled value")


def check_trace_text(text: str) -> Any:
    """`check_trace` of a trace's JSON text (as stored); the parsed trace."""
    if len(text) > MAX_TEXT:
        raise UnsafeTrace(f"a trace's JSON is at most {MAX_TEXT} characters")
    try:
        trace = json.loads(text)
    except (ValueError, RecursionError):
        raise UnsafeTrace("a trace is JSON") from None
    check_trace(trace)
    return trace


def _plain_numbers(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, float)) or _integer(value):
        return True
    if not isinstance(value, list) or depth >= 2:
        return False
    return all(_plain_numbers(v, depth + 1) for v in value)


def _check_instruction(instruction: Any) -> None:
    if not (isinstance(instruction, list) and len(instruction) == 4):
        raise UnsafeTrace("an instruction is [kind, inputs, attrs, outputs]")
    kind, inputs, attrs, outputs = instruction
    if kind not in INSTRUCTIONS:
        raise UnsafeTrace(f"instruction kind {str(kind)[:60]!r} is not allowed")
    if not all(isinstance(part, list) for part in (inputs, attrs, outputs)):
        raise UnsafeTrace(f"{kind}: inputs, attrs and outputs are lists")
    if not all(isinstance(o, str) and _RV.match(o) for o in outputs):
        raise UnsafeTrace(f"{kind}: outputs are random-variable names")
    if kind in ("Annotate", "Unannotate"):
        _check_annotation(kind, inputs, attrs)
        return
    for position, value in enumerate(inputs):
        if kind == "TransformLayout" and position == 1:
            check_index_map(value)
        elif not _input_value(value):
            raise UnsafeTrace(f"{kind}: input {position} is not a variable or a number")
    _check_attrs(kind, attrs)


def _input_value(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, float)) or _integer(value):
        return True
    if isinstance(value, str):
        return value == "None" or bool(_RV.match(value))  # "None": an absent variable
    return isinstance(value, list) and depth < 2 and all(_input_value(v, depth + 1) for v in value)


def _check_annotation(kind: str, inputs: list[Any], attrs: list[Any]) -> None:
    if len(attrs) != 1 or not isinstance(attrs[0], str):
        raise UnsafeTrace(f"{kind}: attrs are [key]")
    key = attrs[0]
    allowed = ANNOTATIONS.get(key)
    if allowed is None:
        raise UnsafeTrace(f"annotation {key[:60]!r} is not one the search writes")
    if not inputs or not (isinstance(inputs[0], str) and _RV.match(inputs[0])):
        raise UnsafeTrace(f"{kind}: its first input is the annotated block or loop")
    if kind == "Unannotate":
        if len(inputs) != 1:
            raise UnsafeTrace("Unannotate takes the block or loop only")
        return
    if len(inputs) != 2 or not allowed(inputs[1]):
        raise UnsafeTrace(f"annotation {key!r} has a value it never takes")


def _check_attrs(kind: str, attrs: list[Any]) -> None:
    for position, value in enumerate(attrs):
        if not isinstance(value, str):
            if not _plain_numbers(value):
                raise UnsafeTrace(f"{kind}: attribute {position} is not a number")
            continue
        if kind == "TransformBlockLayout" and position == 0:
            check_index_map(value)
            continue
        if kind == "GetSBlock" and _NAME.match(value):
            continue  # the block's and the function's names
        if kind in ("CacheRead", "CacheWrite", "SetScope", "ReadAt", "WriteAt") and (
            value in SCOPES
        ):
            continue
        if kind == "Bind" and value in THREAD_AXES:
            continue
        if kind == "Tensorize" and position == 0 and value in TENSOR_INTRINSICS:
            continue
        raise UnsafeTrace(f"{kind}: attribute {position} ({value[:60]!r}) is not allowed")


def check_index_map(value: Any) -> None:
    """An index map's ``save_json`` text holds only `INDEX_MAP_NODES` (integer variables and
    constants, ``+ - * // %``, ``min``, ``max``, integer casts): no call, no load, nothing
    that reaches code."""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise UnsafeTrace("an index map is TVM JSON text")
    try:
        graph = json.loads(value)
    except (ValueError, RecursionError):
        raise UnsafeTrace("an index map is TVM JSON text") from None
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    if not isinstance(nodes, list) or not 0 < len(nodes) <= MAX_INDEX_MAP_NODES:
        raise UnsafeTrace("an index map is TVM JSON text")
    root = graph.get("root_index")
    is_map = _integer(root) and 0 <= root < len(nodes) and isinstance(nodes[root], dict)
    if not is_map or nodes[root].get("type") != "tirx.IndexMap":
        raise UnsafeTrace("the index map's root is not an IndexMap")
    for node in nodes:
        kind = node.get("type") if isinstance(node, dict) else None
        if kind not in INDEX_MAP_NODES:
            raise UnsafeTrace(f"an index map holds a {str(kind)[:60]!r}: only index arithmetic")
        data = node.get("data")
        if kind == "ffi.String" and not (isinstance(data, str) and _NAME.match(data)):
            raise UnsafeTrace("an index map's names are identifiers")
        if kind == "int" and not (
            _integer(data) or (isinstance(data, int) and abs(data) < 1 << 31)
        ):
            raise UnsafeTrace("an index map's constants are integers")
        if kind == "ir.PrimType" and not (
            isinstance(data, dict) and data.get("dtype") in INDEX_DTYPES
        ):
            raise UnsafeTrace("an index map computes integer indices")
