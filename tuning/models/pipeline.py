"""The passes a model goes through before tuning (its tasks) and after (its compiled library).

`tuning_pipeline` is applied identically at task extraction and at compile: a task's workload
is the structural hash of a PrimFunc it produces, so any difference and no record would apply.
On llvm targets weights are layout-free (``AttachAttrLayoutFreeBuffers``) and, after the
database is applied, their repacking is split out, lifted and folded into constants (what
`relax.pipeline.static_shape_tuning_pipeline(cpu_weight_prepack=True)` does): the weights are
bound constants, so the compiled ``main`` takes the model's inputs only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuning.ir import layout_free_operands, structural_hash
from tuning.models.bf16_layout import to_nhwc
from tuning.models.blocked_layout import LEGALIZE, PLAIN, block_for, to_blocked
from tuning.models.fast_math import fast_math as fast_math_functions
from tuning.models.precision import BFLOAT16, FLOAT32, in_precision


@dataclass(frozen=True)
class ExtractedTask:
    """One MetaSchedule task: its name, how often the model calls it, its one-function
    module (the workload) and the operands it may repack."""

    name: str
    weight: int
    mod: Any
    layout_free: tuple[int, ...]


@dataclass(frozen=True)
class TaskRecord:
    """A tuned schedule for the task whose workload hashes to ``shash``."""

    shash: str
    trace_json: str
    run_secs: Sequence[float]
    args_info: Sequence[Any]


def _is_cpu(target: Any) -> bool:
    return str(target.kind.name) == "llvm"


def tuning_pipeline(
    mod: Any,
    target: Any,
    fast_math: bool = True,
    layout: str = PLAIN,
    block: int = 0,
    precision: str = FLOAT32,
) -> Any:
    """``mod`` decomposed, canonicalised, legalised and fused (Relax's "zero" pipeline) under
    ``target``, weights marked layout-free on CPU: the module whose PrimFuncs are tuned.

    With ``fast_math`` (the default), ``exp``, ``erf``, ``tanh``, ``softmax`` and GELU become
    TOPI's polynomial approximations first (`tuning.models.fast_math`), which vectorise: libm's
    are scalar calls. A BERT layer's GELU (erf over 128x3072 values) took 1,212 us exact and
    46 us fast on 2 cores (max error 5e-7 against float64, exact's 3e-7); whole models are
    checked against the exact pipeline when compiled (`tuning.untrusted.model_requests`). The
    workloads differ: a build must use the setting its schedules were tuned with.

    With ``layout`` ``"blocked"`` the convolutions run in a blocked channel layout kept
    between layers, a block the target's vector (`tuning.models.blocked_layout`; ``block``
    names another size of block); their workloads differ from the plain layout's, as fast
    math's do. A model with neither convolutions nor a clip is the same in both.

    With ``precision`` ``"bfloat16"`` its matmuls and convolutions read bf16 operands and sum
    in float32 (`tuning.models.precision`), on CPU its regular convolutions in NHWC with their
    padding a step apart (`tuning.models.bf16_layout`, the bf16 kernel's layout; ``layout``
    then applies to the others): other workloads again."""
    from tvm import relax

    block = block or block_for(layout, target)

    with target:
        mod = relax.transform.DecomposeOpsForInference()(mod)
        mod = relax.transform.CanonicalizeBindings()(mod)
        mod = in_precision(mod, precision)
        if precision == BFLOAT16 and _is_cpu(target):
            mod = to_nhwc(mod)
        if fast_math:
            mod = fast_math_functions(mod)
        if block:
            mod = to_blocked(mod, block)
            mod = relax.transform.LegalizeOps(customize_legalize_map=LEGALIZE)(mod)
        mod = relax.get_pipeline("zero")(mod)
        if _is_cpu(target):
            mod = relax.transform.AttachAttrLayoutFreeBuffers()(mod)
    return mod


def extract(fused: Any, target: Any) -> list[ExtractedTask]:
    """The tuning tasks of a module `tuning_pipeline` produced, in MetaSchedule's order."""
    from tvm.s_tir import meta_schedule as ms

    tasks = []
    for task in ms.relax_integration.extract_tasks(fused, target):
        mod = task.dispatched[0]
        tasks.append(ExtractedTask(str(task.task_name), int(task.weight), mod,
                               layout_free_operands(mod)))  # fmt: skip
    return tasks


def database_of(tasks: Sequence[ExtractedTask], records: Sequence[TaskRecord], target: Any) -> Any:
    """A MetaSchedule database holding each task's record (those whose ``shash`` matches a
    task, the first per task), and the number of records it holds."""
    from tvm.s_tir import meta_schedule as ms

    database = ms.database.MemoryDatabase()
    by_hash = {structural_hash(task.mod): task for task in tasks}
    for record in records:
        task = by_hash.pop(record.shash, None)
        if task is None:
            continue
        workload = database.commit_workload(task.mod)
        database.commit_tuning_record(
            ms.database.TuningRecord.from_json(
                [json.loads(record.trace_json), list(record.run_secs), target.export(),
                 list(record.args_info)],
                workload,
            )
        )  # fmt: skip
    return database


def compile_with(fused: Any, target: Any, database: Any) -> Any:
    """The Relax executable of a `tuning_pipeline` module with ``database``'s schedules applied
    (functions it has no record for are built as written)."""
    import tvm
    from tvm import relax

    with target, database, tvm.transform.PassContext(opt_level=3):
        mod = relax.transform.MetaScheduleApplyDatabase()(fused)
        if _is_cpu(target):
            mod = relax.transform.SplitLayoutRewritePreproc()(mod)
            mod = relax.transform.LiftTransformParams()(mod)
            mod = relax.transform.FoldConstant()(mod)
        return tvm.compile(mod, target=target)
