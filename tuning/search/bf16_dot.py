# TVMScript's buffer annotations are calls, not types: mypy cannot read its kernels.
# mypy: disable-error-code="valid-type,untyped-decorator"
"""The AVX512-BF16 micro-kernel: a bf16 matmul on ``vdpbf16ps``, bf16 products summed in fp32.

``vdpbf16ps`` adds, in each of 16 fp32 lanes, the products of a pair of bf16 from each operand:
for a matmul ``C[i, j] += A[i, k] * B[k, j]`` that is one row's pair ``A[i, k:k+2]`` broadcast
against 16 columns' pairs of B, which must lie together: B packed as ``[j / 16, k / 2, 16, 2]``
(the VNNI layout). `DOT_16x2` is the tensor intrinsic for it (TVM's x86 file has only the
u8·i8 VNNI ones); its body calls `tuning.hardware.bf16.DPBF16PS`, always inlined.

`bf16_matmul` is the workload with the weight packing as a block of its own (marked as
MetaSchedule's layout-rewrite preproc, so it runs once at load, as the packed space's weights
do: `tuning.publish.packing`), and `bf16_micro_kernel` schedules it the way
`tuning.search.micro_kernels` schedules fp32: a register block of ``rows`` x ``vectors``
accumulators over a ``kc`` cache block of the packed weight, the column blocks in parallel.
Measured (`bench/bf16_dense.py`) against the bf16 peak (`tuning.hardware.peak_bf16`).

Its library has the per-call kernel and the pack function only (``split_packed(...,
drop_in=False)``): in a drop-in ``main`` B's copy is a buffer of the kernel's own, which TVM's
bf16 legalisation widens to fp32, and the intrinsic reads bf16 bits.
"""

from __future__ import annotations

from typing import Any

from tuning.hardware.bf16 import DPBF16PS, DPBF16PS_LL

DOT_16x2 = "tunehub_avx512bf16_dot_16x2"
LANES = 16  # fp32 accumulators in a zmm register
PAIR = 2  # bf16 products each lane adds
PACK_BLOCK = "B_pack"
PREPROC = "meta_schedule.layout_rewrite_preproc"


def register_bf16_intrinsics() -> None:
    """Register `DOT_16x2` with TVM (idempotent)."""
    from tvm.s_tir import TensorIntrin
    from tvm.script import tirx as T

    try:
        TensorIntrin.get(DOT_16x2)
        return
    except Exception:  # noqa: BLE001, S110 - not registered yet: TVM raises a ValueError/TVMError
        pass

    @T.prim_func(s_tir=True)
    def desc(
        A: T.Buffer((PAIR,), "bfloat16", offset_factor=1),
        B: T.Buffer((LANES, PAIR), "bfloat16", offset_factor=1),
        C: T.Buffer((LANES,), "float32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:LANES], A[0:PAIR], B[0:LANES, 0:PAIR])
            T.writes(C[0:LANES])
            for i, k in T.grid(LANES, PAIR):
                with T.sblock("update"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    C[vi] = C[vi] + T.Cast("float32", A[vk]) * T.Cast("float32", B[vi, vk])

    @T.prim_func(s_tir=True)
    def impl(
        A: T.Buffer((PAIR,), "bfloat16", offset_factor=1),
        B: T.Buffer((LANES, PAIR), "bfloat16", offset_factor=1),
        C: T.Buffer((LANES,), "float32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:LANES], A[0:PAIR], B[0:LANES, 0:PAIR])
            T.writes(C[0:LANES])
            with T.attr(0, "pragma_import_llvm", DPBF16PS_LL):
                # The row's pair as one 32-bit value in every lane; the 16 columns' pairs.
                pair = T.reinterpret("uint32", A[T.ramp(0, 1, PAIR)])
                C[T.ramp(0, 1, LANES)] = T.call_pure_extern(
                    "float32x16",
                    DPBF16PS,
                    C[T.ramp(0, 1, LANES)],
                    T.reinterpret("uint16x32", T.Broadcast(pair, LANES)),
                    T.reinterpret("uint16x32", B[0, T.ramp(0, 1, LANES * PAIR)]),
                )

    TensorIntrin.register(DOT_16x2, desc, impl)


def bf16_matmul(m: int, n: int, k: int) -> Any:
    """The PrimFunc ``C[m, n] = A[m, k] @ B[k, n]``, A and B bf16, C fp32 (fp32 sums), reading B
    through a copy, the `PACK_BLOCK` block (`bf16_micro_kernel` lays it out packed). ``n`` a
    multiple of 16, ``k`` even."""
    from tvm import te

    if n % LANES or k % PAIR:
        raise ValueError(f"a bf16 matmul needs n % {LANES} == 0 and k % {PAIR} == 0")
    a = te.placeholder((m, k), "bfloat16", name="A")
    b = te.placeholder((k, n), "bfloat16", name="B")
    packed = te.compute((k, n), lambda kk, jj: b[kk, jj], name=PACK_BLOCK)
    r = te.reduce_axis((0, k), name="k")
    c = te.compute(
        (m, n),
        lambda i, j: te.sum(a[i, r].astype("float32") * packed[r, j].astype("float32"), axis=r),
        name="C",
    )
    return te.create_prim_func([a, b, c]).with_attr("layout_free_buffers", [1])


def bf16_micro_kernel(sch: Any, rows: int, vectors: int, kc: int) -> None:
    """Schedule `bf16_matmul`'s ``sch`` in place: column blocks of ``vectors`` x 16 in
    parallel, ``k`` in blocks of ``kc`` (even), row blocks of ``rows``, each (row, 16 columns,
    pair) a `DOT_16x2`; B's copy laid out ``[n / 16, k / 2, 16, 2]`` and marked to run once, at
    load (`tuning.publish.packing.split_packed` makes it the artifact's pack function)."""
    register_bf16_intrinsics()
    pack = sch.get_sblock(PACK_BLOCK)
    sch.transform_layout(
        pack, ("write", 0), lambda kk, jj: (jj // LANES, kk // PAIR, jj % LANES, kk % PAIR)
    )
    sch.annotate(pack, PREPROC, True)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, rows])
    jq, jl = sch.split(j, [None, LANES])
    jo, jv = sch.split(jq, [None, vectors])
    ko, k2, kp = sch.split(k, [None, kc // PAIR, PAIR])
    sch.reorder(jo, ko, io, k2, ii, jv, jl, kp)
    sch.parallel(jo)
    init = sch.decompose_reduction(block, ko)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.tensorize(jl, DOT_16x2)
    sch.unroll(jv)
    sch.unroll(ii)
