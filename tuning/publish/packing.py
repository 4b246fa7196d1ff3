"""Packed weight layouts: what a schedule from the packed space needs at run time.

MetaSchedule's `RewriteLayout` postprocessor (on when a PrimFunc lists ``layout_free_buffers``)
lets a schedule choose the memory layout of its constant operands (matmul/dense weights, conv
kernels): it inserts a "layout rewrite preproc" block that copies the weight into the packed
layout the inner loops stream. Deployments do that copy once, when the weights are loaded; only
the kernel that reads the packed weight runs per call.

`split_packed` turns a scheduled IRModule into the library a build fetches:

* ``main_packed``: the per-call kernel, taking the packed weights (MetaSchedule's own
  `RemoveWeightLayoutRewriteBlock`, exactly what its builder measured);
* ``pack_<i>``: one per packed parameter ``i``, turning the weight as the user holds it into the
  packed array (run once, at load time);
* ``main``: the whole scheduled function with the user's layouts, packing inside every call:
  the drop-in entry point, correct but slower.

So the artifact carries the pre-transform; the published latency is ``main_packed``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.ir import param_buffer

PREPROC_ANNOTATION = "meta_schedule.layout_rewrite_preproc"


@dataclass(frozen=True)
class PackedParam:
    """One parameter a schedule reads in a packed layout."""

    index: int  # position in ``main``'s parameters
    name: str  # the buffer's name
    shape: list[int]  # as the user holds it
    packed_shape: list[int]  # as ``main`` takes it
    dtype: str
    function: str  # the library function that packs it: pack_<index>

    def as_json(self) -> dict[str, Any]:
        """The JSON form stored with a schedule and served with its artifact."""
        return {
            "index": self.index,
            "name": self.name,
            "shape": self.shape,
            "packed_shape": self.packed_shape,
            "dtype": self.dtype,
            "function": self.function,
        }


PACKED_ENTRY = "main_packed"


@dataclass(frozen=True)
class SplitModule:
    """A scheduled module ready to compile: ``mod`` holds ``main`` and, when ``packed`` is not
    empty, ``main_packed`` and the pack functions."""

    mod: Any
    packed: list[PackedParam]

    @property
    def entry(self) -> str:
        """The function to time and to call per inference."""
        return PACKED_ENTRY if self.packed else "main"


def _preproc_blocks(scheduled: Any) -> list[Any]:
    """The layout-rewrite blocks directly under the root block of ``main``."""
    from tvm.s_tir.schedule import Schedule

    sch = Schedule(scheduled)
    root = sch.get_sblock(scheduled["main"].body.block.name_hint)
    blocks = [sch.get(rv) for rv in sch.get_child_blocks(root)]
    return [block for block in blocks if PREPROC_ANNOTATION in block.annotations]


def _pack_function(block: Any, shape: list[int], dtype: str, name: str) -> Any:
    """A PrimFunc (weight) -> packed weight, doing what the preproc block does."""
    from tvm import te
    from tvm.s_tir.schedule import Schedule
    from tvm.tirx import IndexMap, IntImm

    store = block.body
    index_map = IndexMap([iv.var for iv in block.iter_vars], list(store.indices), None)
    # The pack's loops index like the block does (a Relax model's tasks index with int64):
    # an index map over int64 variables does not parse over int32 loops.
    index_dtype = str(block.iter_vars[0].dom.extent.ty) if block.iter_vars else "int32"
    extents = [IntImm(index_dtype, extent) for extent in shape]
    weight = te.placeholder(extents, dtype, name=name)
    packed = te.compute(extents, lambda *i: weight(*i), name="packed")
    sch = Schedule(te.create_prim_func([weight, packed]))
    sch.transform_layout(sch.get_sblock("packed"), ("write", 0), index_map)
    return sch.mod["main"]


def split_packed(scheduled: Any, drop_in: bool = True) -> SplitModule:
    """Split a scheduled module into the per-call kernel and its weight pre-transforms.

    A module without layout-rewrite blocks (the plain space, or a schedule that packed
    nothing) comes back unchanged with ``packed=[]``, and so does one whose packing TVM cannot
    express as a function of its own (`TransformLayout` refuses the inverse): its ``main``
    packs inside every call, correct and timed as such. Pack functions index as the schedule's
    blocks do (int64 for Relax models' tasks).
    ``drop_in=False`` leaves the drop-in ``main`` out (what is timed does not need it; the
    published library has it).
    """
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    func = scheduled["main"]
    blocks = _preproc_blocks(scheduled)
    if not blocks:
        return SplitModule(mod=scheduled, packed=[])
    param_of = {param_buffer(func, p).name: i for i, p in enumerate(func.params)}
    kernel = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(scheduled)["main"]
    functions = {PACKED_ENTRY: kernel.with_attr("global_symbol", PACKED_ENTRY)}
    if drop_in:
        functions["main"] = func
    packed: list[PackedParam] = []
    for block in blocks:
        source = block.body.value.source  # the weight buffer the preproc block copies
        index = param_of[source.name]
        shape = [int(x) for x in source.shape]
        target_buffer = param_buffer(kernel, kernel.params[index])
        name = f"pack_{index}"
        try:
            pack = _pack_function(block, shape, str(source.dtype), source.name)
        except RuntimeError:  # TVM cannot express this layout's pack
            return SplitModule(mod=scheduled, packed=[])
        functions[name] = pack.with_attr("global_symbol", name)
        packed.append(
            PackedParam(
                index=index,
                name=str(source.name),
                shape=shape,
                packed_shape=[int(x) for x in target_buffer.shape],
                dtype=str(source.dtype),
                function=name,
            )
        )
    return SplitModule(mod=tvm.IRModule(functions), packed=sorted(packed, key=lambda p: p.index))
