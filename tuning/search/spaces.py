"""Search spaces: what MetaSchedule may do to a workload.

* ``plain``: MetaSchedule's default space for the target (``post-order-apply`` with the default
  rules), on the workload as the user wrote it.
* ``packed`` (CPU targets): the workload's constant operands (weights: matmul/dense ``B``, conv
  kernels) are marked layout-free, so MetaSchedule's `RewriteLayout` postprocessor packs them into
  the order the tiled loops read them (`tuning.publish.packing` splits the pre-transform out of the
  kernel), and the multi-level tiling rule makes the innermost spatial tile exactly one vector
  register wide for the target (AVX-512: 16 fp32 lanes, AVX2: 8, NEON: 4) with the other
  innermost tiles capped so the accumulators fit the register file (`register_tile_limit`);
  where the weight-indexed output axis is not the innermost one (NCHW convolutions: K, with W
  innermost), that axis is split into the vector lanes and accumulated in a channel-blocked
  cache (`tuning.search.channel_vectors`), as oneDNN's nChw16c kernels do; the outer loops are
  parallelised over every core as in the plain space. Matmul-shaped blocks also get a BLAS-style
  micro-kernel as one more design space (`tuning.search.micro_kernels`).

Both spaces keep their records apart (each record says which space produced it); the best of a
(workload, target) is the fastest verified candidate of either, and says which space won.
"""

from __future__ import annotations

from typing import Any

from tuning.hardware.bf16 import AMX, bf16_unit, has_bf16_dot
from tuning.hardware.vectors import vector_bits
from tuning.ir import LAYOUT_FREE_ATTR, param_buffer

PLAIN = "plain"
PACKED = "packed"
SPACES = (PLAIN, PACKED)
AUTO = "auto"


class SpaceError(ValueError):
    """A space that cannot be searched for this workload on this target."""


def packed_supported(constant_operands: tuple[int, ...], target_kind: str) -> str | None:
    """Why the packed space is unavailable, or None when it is available."""
    if target_kind != "llvm":
        return f"the packed space is for CPU (llvm) targets; this target is {target_kind}"
    if not constant_operands:
        return "this workload has no constant operand (weight) whose layout could be packed"
    return None


def resolve_space(requested: str, constant_operands: tuple[int, ...], target_kind: str) -> str:
    """The space a job searches: ``auto`` is ``packed`` where it is available, else ``plain``.
    Raises `SpaceError` when ``packed`` is asked for where it is not available."""
    if requested == PLAIN:
        return PLAIN
    reason = packed_supported(constant_operands, target_kind)
    if requested == AUTO:
        return PLAIN if reason else PACKED
    if requested == PACKED:
        if reason:
            raise SpaceError(reason)
        return PACKED
    raise SpaceError(f"unknown search space {requested!r}; one of {', '.join((AUTO, *SPACES))}")


def space_module(mod: Any, space: str, constant_operands: tuple[int, ...]) -> Any:
    """The IRModule MetaSchedule searches in ``space`` (``packed``: the constant operands are
    listed as ``layout_free_buffers``, which turns `RewriteLayout` on)."""
    import tvm

    if space != PACKED:
        return mod
    func = mod["main"].with_attr(LAYOUT_FREE_ATTR, [int(i) for i in constant_operands])
    return tvm.IRModule({"main": func})


def register_tile_limit(target: Any) -> int:
    """Largest innermost tile factor of the packed space: with the innermost spatial tile one
    vector wide, the next one counts accumulator registers, and it must leave room for the
    broadcast operand and the weight vector (AVX-512 and AArch64 have 32 vector registers,
    AVX2/SSE 16)."""
    from tvm.target import codegen

    many = codegen.target_has_features("avx512f", target) or "aarch64" in str(
        target.attrs.get("mtriple", "")
    )
    return 16 if many else 8


def _vector_fits_output(mod: Any, bits: int) -> bool:
    """True when the innermost axis of the function's output (its last parameter) is a whole
    number of ``bits``-wide vectors of the output's dtype (True when unknown)."""
    import tvm

    if mod is None:
        return True
    func = mod["main"]
    out = param_buffer(func, func.params[-1])
    try:
        extent = int(out.shape[-1])
        lanes = max(1, bits // tvm.DataType(str(out.dtype)).bits)
    except (TypeError, ValueError, IndexError, AttributeError):
        return True
    return extent % lanes == 0


def reads_bf16(mod: Any) -> bool:
    """Whether ``mod``'s ``main`` takes a bfloat16 parameter."""
    func = mod["main"]
    return any(str(param_buffer(func, p).dtype) == "bfloat16" for p in func.params)


def space_generator(space: str, target: Any, mod: Any = None) -> Any:
    """The design-space generator for ``space`` on ``target`` (``post-order-apply`` with
    MetaSchedule's default rules for ``plain``). In the packed space, a block whose output
    channel can fill the vector lanes gets them (`tuning.search.channel_vectors`); otherwise the
    innermost output tile is one vector wide when the output's innermost extent (of ``mod``,
    when given) is a multiple of the vector width, else (a masked tail would be needed)
    MetaSchedule's own tiling, with the register cap, is used."""
    if space != PACKED:
        return "post-order-apply"
    from tvm.s_tir.meta_schedule import schedule_rule as rules
    from tvm.s_tir.meta_schedule.mutator import Mutator
    from tvm.s_tir.meta_schedule.postproc import Postproc, RewriteLayout, RewriteTensorize
    from tvm.s_tir.meta_schedule.space_generator import PostOrderApply

    from tuning.search.bf16_rule import Bf16MicroKernelOr

    # Deferred with TVM (channel_vectors imports MetaSchedule at module level): the API imports
    # this module for `resolve_space` and starts without TVM. channel_vectors imports only
    # tuning.ir from here, so this hides no cycle.
    from tuning.search.channel_vectors import WeightAxisInnermost
    from tuning.search.micro_kernels import MicroKernelOr, register_budget

    bits = vector_bits(target)
    wide = _vector_fits_output(mod, bits)
    # The bf16 micro-kernel's instruction, for a module with bf16 operands (or any, unknown).
    has_dot = has_bf16_dot(target) and (mod is None or reads_bf16(mod))
    reuse_write = rules.ReuseType(req="may", levels=[1, 2], scope="global")
    limit = register_tile_limit(target)

    def vector_tiles(reuse: Any) -> Any:
        return rules.MultiLevelTilingWideVector(
            structure="SSRSRS",
            vector_length_in_bits=bits,
            max_innermost_factor=limit,
            reuse_write=reuse,
        )

    sch_rules = []
    for rule in rules.ScheduleRule.create("llvm"):
        if isinstance(rule, rules.ParallelizeVectorizeUnroll):
            rule = _vectors_of_one_register(rule, bits)
        if isinstance(rule, rules.MultiLevelTiling):
            other = (
                vector_tiles(reuse_write)
                if wide
                else rules.MultiLevelTiling(
                    structure="SSRSRS", max_innermost_factor=limit, reuse_write=reuse_write
                )
            )
            # Blocks with the weight-indexed (output channel) axis outside the innermost
            # one (NCHW convolutions) get that axis in the vector lanes; their write cache
            # is the channel-blocked one tuning.search.channel_vectors makes, not the tiling's.
            channel_tiles = vector_tiles(rules.ReuseType(req="no", levels=[], scope="global"))
            budget = register_budget(limit)
            rule = MicroKernelOr(WeightAxisInnermost(channel_tiles, other, bits), bits, budget)
            if has_dot:  # bf16 matmuls on vdpbf16ps (and AMX tiles), beside the spaces that
                # widen bf16
                rule = Bf16MicroKernelOr(rule, budget, amx=bf16_unit(target) == AMX)
        sch_rules.append(rule)
    postprocs = list(Postproc.create("llvm"))
    if has_dot:  # the bf16 micro-kernel's blocks, once their init is split off, and before
        # RewriteLayout (which fails on the weight copy of a block not yet tensorized)
        at = next(i for i, p in enumerate(postprocs) if isinstance(p, RewriteLayout))
        # The init block's 16 lanes are one vector already: vectorising its loop (vectors of
        # 16 columns) would ask for 64-lane vectors.
        postprocs.insert(at, RewriteTensorize(vectorize_init_loop=False))
    return PostOrderApply(
        sch_rules=sch_rules,
        postprocs=postprocs,
        mutator_probs=Mutator.create("llvm"),
    )


def _vectors_of_one_register(rule: Any, bits: int) -> Any:
    """MetaSchedule's parallelise-vectorise-unroll ``rule`` with loops the postprocessor
    vectorises (epilogues, layout write-backs) fused up to one register (16 fp32 on AVX-512)
    instead of its 64 elements; its other settings kept. At 64, ResNet-18's 7x7 channel-blocked
    write-back was fused into one 49-lane loop indexed by // 7 and % 7, which LLVM took 43 s to
    compile (0.2 s without; the kernel ran 659 vs 648 us): every verified candidate and every
    model build paid it."""
    from tvm.s_tir.meta_schedule import schedule_rule as rules

    return rules.ParallelizeVectorizeUnroll(
        max_jobs_per_core=int(rule.max_jobs_per_core),
        max_vectorize_extent=max(4, bits // 32),
        unroll_max_steps=[int(step) for step in rule.unroll_max_steps],
        unroll_explicit=bool(rule.unroll_explicit),
    )
