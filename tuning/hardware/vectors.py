"""The vector registers a target has: what the search's spaces, the peak and the bandwidth
kernels size their vectors by."""

from __future__ import annotations

from typing import Any


def vector_bits(target: Any) -> int:
    """Width of the target's widest fp32 vector registers, in bits (512, 256 or 128)."""
    from tvm.target import codegen

    if codegen.target_has_features("avx512f", target):
        return 512
    if codegen.target_has_features("avx2", target) or codegen.target_has_features("avx", target):
        return 256
    return 128
