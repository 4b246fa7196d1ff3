"""A MetaSchedule builder that does not time out on small machines.

MetaSchedule's `default_build` imports `tvm.s_tir.tensor_intrin` in every fresh popen worker
(~26 s on a 2-core machine, 20 s of it CUDA intrinsics), and `LocalBuilder` starts fresh workers for
every batch, so with the 30 s default timeout nearly every candidate fails once the machine is a
little loaded. The candidates arrive already scheduled and tensorized, so the import is not needed
to build them: `fast_build` does what `default_build` does minus that import (LLVM then builds a
candidate in 0.03-0.18 s).
"""

from __future__ import annotations

from typing import Any


def fast_build(mod: Any, target: Any, _params: Any = None) -> Any:
    """`default_build` without importing the tensor intrinsics (runs in a popen worker)."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def make_builder(max_workers: int, timeout_sec: float = 60.0) -> Any:
    """A `LocalBuilder` using `fast_build`."""
    from tvm.s_tir.meta_schedule.builder import LocalBuilder

    return LocalBuilder(max_workers=max_workers, timeout_sec=timeout_sec, f_build=fast_build)
