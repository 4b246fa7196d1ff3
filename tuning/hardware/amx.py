# TVMScript's buffer annotations are calls, not types: mypy cannot read its kernels.
# mypy: disable-error-code="valid-type,untyped-decorator,name-defined"
"""AMX tile tensor intrinsics: a block of a bf16 matmul on ``tdpbf16ps``, fp32 accumulators kept
in tile registers over a k block.

One ``tdpbf16ps`` adds to a 16x16 fp32 tile the product of a 16x32 bf16 A tile (16 rows of A, 32
k each) and a B tile of 16 k pairs x 16 columns x 2 (the VNNI layout: B packed as ``[j / 16,
k / 2, 16, 2]``, the layout `tuning.search.bf16_dot` packs weights in, so one B tile is 16
contiguous rows of 64 bytes). An intrinsic here (`amx_intrinsic`) computes ``C[rows, cols] +=
A[rows, kc] . B`` for a block of up to 2 x 2 accumulator tiles (tiles 0-3), loading A into tiles
4-5 and B into 6-7 at each step of 32 k: it configures the tiles itself (``ldtilecfg``: every
tile 16 rows of 64 bytes), loads the accumulators from C, runs the k loop, stores them back
and releases the tiles.
Configuring in every call costs ~0.1 us against the microseconds of a k block, and keeps each
call correct whatever another library in the process did to the tile configuration.

The intrinsics are code tunehub writes, named ``tunehub_amx_bf16_<rows>x<cols>x<kc>`` and
registered on demand (`register_amx_intrinsic`; a process replaying a trace registers the ones it
names: `register_named_amx_intrinsics`). A process must hold the tile state to run one
(`tuning.hardware.bf16.request_amx`).
"""

from __future__ import annotations

import re
from typing import Any

PREFIX = "tunehub_amx_bf16_"
NAME = re.compile(PREFIX + r"(\d+)x(\d+)x(\d+)")
TDPBF16PS = "llvm.x86.tdpbf16ps"  # in the script of a module tensorized with one
LOAD, STORE = "llvm.x86.tileloadd64", "llvm.x86.tilestored64"
TILE_ROWS = 16  # rows of every tile
TILE_K = 32  # bf16 of an A tile row (64 bytes)
TILE_COLS = 16  # fp32 columns of an accumulator tile; columns of a B tile
BLOCKS = (
    (32, 32),
    (32, 16),
    (16, 32),
    (16, 16),
)  # (rows, cols) a call may cover, 2x2 tiles at most
MAX_KC = 4096  # the longest k block a call covers (32 rows of A: 256 KiB, in L2)
CONFIG_BYTES = 64


def amx_intrinsic(rows: int, cols: int, kc: int) -> str:
    """The name of the intrinsic for a ``rows`` x ``cols`` block over ``kc`` (registered)."""
    if (rows, cols) not in BLOCKS or kc % TILE_K or not 0 < kc <= MAX_KC:
        raise ValueError(f"no AMX intrinsic covers {rows}x{cols}x{kc}")
    name = f"{PREFIX}{rows}x{cols}x{kc}"
    register_amx_intrinsic(name)
    return name


def register_named_amx_intrinsics(text: str) -> None:
    """Register every AMX intrinsic ``text`` (a trace, a script) names, for replaying it; a
    name of no intrinsic (a block may be called anything) is left for the replay to refuse."""
    for rows, cols, kc in {m.groups() for m in NAME.finditer(text)}:
        try:
            amx_intrinsic(int(rows), int(cols), int(kc))
        except ValueError:
            continue


def register_amx_intrinsic(name: str) -> None:
    """Register ``name`` (``tunehub_amx_bf16_<rows>x<cols>x<kc>``) with TVM; idempotent."""
    from tvm.s_tir import TensorIntrin

    try:
        TensorIntrin.get(name)
        return
    except Exception:  # noqa: BLE001, S110 - not registered yet: TVM raises a ValueError/TVMError
        pass
    found = NAME.fullmatch(name)
    if found is None:
        raise ValueError(f"not an AMX intrinsic name: {name!r}")
    rows, cols, kc = (int(x) for x in found.groups())
    TensorIntrin.register(name, *_desc_and_impl(rows, cols, kc))


def _tile(op: str, tile: Any, pointer: Any, stride_bytes: Any) -> Any:
    """The call of tile load or store ``op`` on register ``tile`` (an immediate once the
    loops over tiles are unrolled) at ``pointer``, rows ``stride_bytes`` apart."""
    from tvm.script import tirx as T

    return T.call_llvm_intrin("void", op, T.uint8(tile), pointer, T.Cast("int64", stride_bytes))


def _dot(accumulator: Any, a_tile: Any, b_tile: Any) -> Any:
    """The call of ``tdpbf16ps`` adding tile ``a_tile`` times tile ``b_tile`` to
    ``accumulator`` (immediates once the loops over tiles are unrolled)."""
    from tvm.script import tirx as T

    tiles = (T.uint8(accumulator), T.uint8(a_tile), T.uint8(b_tile))
    return T.call_llvm_intrin("void", TDPBF16PS, *tiles)


def _desc_and_impl(rows: int, cols: int, kc: int) -> tuple[Any, Any]:
    """The intrinsic's description (the block it matches) and implementation (the tile code)."""
    from tvm.script import tirx as T

    row_tiles, col_tiles, steps = rows // TILE_ROWS, cols // TILE_COLS, kc // TILE_K
    a_shape, b_shape = (rows, kc), (col_tiles, kc // 2, TILE_COLS, 2)

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, a_shape, "bfloat16", offset_factor=1, strides=[T.int32(), 1])
        B = T.match_buffer(
            b, b_shape, "bfloat16", offset_factor=1, strides=[T.int32(), T.int32(), 2, 1]
        )
        C = T.match_buffer(c, (rows, cols), "float32", offset_factor=1, strides=[T.int32(), 1])
        with T.sblock("root"):
            T.reads(C[0:rows, 0:cols], A[0:rows, 0:kc], B[0:col_tiles, 0 : kc // 2, 0:16, 0:2])
            T.writes(C[0:rows, 0:cols])
            for i, j, k in T.grid(rows, cols, kc):
                with T.sblock("update"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast(
                        "float32", B[vj // 16, vk // 2, vj % 16, vk % 2]
                    )

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, a_shape, "bfloat16", offset_factor=1, strides=[sa, 1])
        B = T.match_buffer(b, b_shape, "bfloat16", offset_factor=1, strides=[sb0, sb1, 2, 1])
        C = T.match_buffer(c, (rows, cols), "float32", offset_factor=1, strides=[sc, 1])
        with T.sblock("root"):
            T.reads(C[0:rows, 0:cols], A[0:rows, 0:kc], B[0:col_tiles, 0 : kc // 2, 0:16, 0:2])
            T.writes(C[0:rows, 0:cols])
            cfg = T.alloc_buffer((CONFIG_BYTES,), "uint8", scope="local")
            for x in range(CONFIG_BYTES):
                cfg[x] = T.uint8(0)
            cfg[0] = T.uint8(1)  # palette 1
            for t in range(8):
                cfg[16 + 2 * t] = T.uint8(64)  # bytes per row
                cfg[48 + t] = T.uint8(16)  # rows
            T.evaluate(T.call_llvm_intrin("void", "llvm.x86.ldtilecfg", cfg.access_ptr("r")))
            for r in T.unroll(row_tiles):
                for q in T.unroll(col_tiles):
                    T.evaluate(_tile(LOAD, r * 2 + q, T.address_of(C[r * 16, q * 16]), 4 * sc))
            for s in range(steps):
                for r in T.unroll(row_tiles):
                    T.evaluate(_tile(LOAD, 4 + r, T.address_of(A[r * 16, s * 32]), 2 * sa))
                for q in T.unroll(col_tiles):
                    T.evaluate(_tile(LOAD, 6 + q, T.address_of(B[q, s * 16, 0, 0]), 2 * sb1))
                for r in T.unroll(row_tiles):
                    for q in T.unroll(col_tiles):
                        T.evaluate(_dot(r * 2 + q, 4 + r, 6 + q))
            for r in T.unroll(row_tiles):
                for q in T.unroll(col_tiles):
                    T.evaluate(_tile(STORE, r * 2 + q, T.address_of(C[r * 16, q * 16]), 4 * sc))
            # Tiles back to their initial state: a context switch saves 8 KiB less, and the
            # core may enter its deeper idle states.
            T.evaluate(T.call_llvm_intrin("void", "llvm.x86.tilerelease"))

    return desc, impl
