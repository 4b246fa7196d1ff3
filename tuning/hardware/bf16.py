# TVMScript's buffer annotations are calls, not types: mypy cannot read its kernels.
# mypy: disable-error-code="valid-type,untyped-decorator"
"""The bf16 units of a CPU target and how tunehub's kernels reach them.

Two x86 units multiply bf16 with fp32 accumulation:

- **AMX** (``amx-tile`` + ``amx-bf16``; Sapphire, Emerald, Granite Rapids): tile registers and
  ``tdpbf16ps``. Linux hands a process the 8 KiB tile state only after it asks
  (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, `request_amx`); a hypervisor may
  list the CPUID flags and still refuse (a Firecracker VM on an EPYC host: EOPNOTSUPP).
- **AVX512-BF16** (``avx512bf16``; Cooper Lake, Sapphire Rapids and later, Zen 4 and later):
  ``vdpbf16ps``, 16 fp32 lanes each adding two bf16 products, twice the FMA's flops.

TVM 0.27 stores bf16 as uint16 in the code it generates and cannot emit a ``<32 x bfloat>``
LLVM value (its codegen crashes without the legalisation that makes them uint16), while LLVM 22's
``vdpbf16ps`` intrinsic takes exactly that. So the dot product is a small LLVM IR function of
ours (`DPBF16PS_LL`, always inlined) that takes the uint16 vectors, bit-casts them and calls the
intrinsic; a kernel imports it with the ``pragma_import_llvm`` attribute and calls it by name
(`DPBF16PS`). It is code tunehub writes, never code a user sends.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys
from typing import Any

from tuning.hardware.amx import PREFIX as AMX_PREFIX
from tuning.hardware.amx import register_named_amx_intrinsics

AMX = "amx"
AVX512_BF16 = "avx512_bf16"
UNIT_FEATURES = {AMX: ("amx-tile", "amx-bf16"), AVX512_BF16: ("avx512bf16",)}
UNIT_NAMES = {AMX: "AMX-BF16 (amx-tile, amx-bf16)", AVX512_BF16: "AVX512-BF16 (avx512bf16)"}

DPBF16PS = "tunehub_dpbf16ps"
DPBF16PS_LL = f"""
define internal <16 x float> @{DPBF16PS}(<16 x float> %acc, <32 x i16> %a, <32 x i16> %b) #0 {{
  %x = bitcast <32 x i16> %a to <32 x bfloat>
  %y = bitcast <32 x i16> %b to <32 x bfloat>
  %r = call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> %acc, <32 x bfloat> %x,
                                                          <32 x bfloat> %y)
  ret <16 x float> %r
}}
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)
attributes #0 = {{ alwaysinline nounwind "target-features"="+avx512f,+avx512bf16" }}
"""

DOT_16x2 = "tunehub_avx512bf16_dot_16x2"  # C[16] += A[2] . B[16, 2] on vdpbf16ps
LANES = 16  # fp32 accumulators in a zmm register
PAIR = 2  # bf16 products each lane adds

_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


def bf16_unit(target: Any) -> str | None:
    """The fastest bf16 unit ``target`` (a TVM llvm target) declares: `AMX`, `AVX512_BF16` or
    None. Declared, not checked against this machine: `tuning.hardware.host` switches off in
    the host target what this CPU (or its OS, for AMX) does not give."""
    from tvm.target import codegen

    if target.kind.name != "llvm":
        return None
    for unit in (AMX, AVX512_BF16):
        if all(codegen.target_has_features(f, target) for f in UNIT_FEATURES[unit]):
            return unit
    return None


def has_bf16_dot(target: Any) -> bool:
    """Whether ``target`` (a TVM target) declares AVX512-BF16, the unit tunehub's bf16 kernels
    are built for (`DOT_16x2`, and beside it, where the target also has AMX-BF16, the tile kernel
    of `tuning.hardware.amx`: every CPU with AMX has AVX512-BF16)."""
    from tvm.target import codegen

    return target.kind.name == "llvm" and bool(codegen.target_has_features("avx512bf16", target))


def missing_bf16_words() -> str:
    """What a target lacks for tunehub's bf16 kernels, in words for an error message."""
    return f"{UNIT_NAMES[AVX512_BF16]} (every CPU with AMX-BF16 has it)"


@functools.cache
def request_amx() -> bool:
    """Ask Linux for the AMX tile state for this process (every thread of it, and children it
    forks); True when granted. Without it the first tile instruction kills the process with
    SIGILL. Asked once per process; False off x86-64 Linux or where the OS refuses."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False  # 158 is another system call elsewhere (getgroups on arm64)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return False
    syscall.restype = ctypes.c_long
    done = syscall(
        ctypes.c_long(_SYS_ARCH_PRCTL),
        ctypes.c_long(_ARCH_REQ_XCOMP_PERM),
        ctypes.c_long(_XFEATURE_XTILEDATA),
    )
    return int(done) == 0


def reads_packed_bf16(text: str) -> bool:
    """Whether a trace (``text``) tensorizes with one of tunehub's bf16 intrinsics, which read
    the packed weight's bf16 bits: such a kernel has no drop-in ``main``
    (`tuning.publish.packing.split_packed`)."""
    return DOT_16x2 in text or AMX_PREFIX in text


def register_named_intrinsics(text: str) -> None:
    """Register tunehub's tensor intrinsics that ``text`` (a trace) names, before replaying it:
    `DOT_16x2`, and the AMX tile blocks (`tuning.hardware.amx`)."""
    if DOT_16x2 in text:
        register_bf16_intrinsics()
    register_named_amx_intrinsics(text)


def register_bf16_intrinsics() -> None:
    """Register `DOT_16x2` with TVM (idempotent): every process that schedules or replays a
    trace tensorized with it (`tuning.hardware.intrinsics.load_tensor_intrinsics` and
    `register_named_intrinsics` call this)."""
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
