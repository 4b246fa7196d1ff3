"""Verification: a candidate is compiled and its output compared with the reference before it
can become a served schedule (`tuning.measure` runs and times it).

Its trace passes `tuning.checks.trace_gate` before it is replayed, and its library is exported
without start files and checked (`tuning.checks.library_check`) before anything loads it; the
worker runs it in its jailed kernel runner (`tuning.measure.devices`), never in its own
process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tuning.checks.library_check import UnsafeLibrary, export_library
from tuning.checks.trace_gate import check_trace_text
from tuning.hardware.amx import TDPBF16PS
from tuning.hardware.bf16 import (
    AMX,
    DPBF16PS,
    bf16_unit,
    has_bf16_dot,
    register_named_intrinsics,
    request_amx,
)


class VerificationError(Exception):
    """A candidate whose output does not match the reference."""


def apply_trace(mod: Any, trace_json: str) -> Any:
    """The scheduled IRModule that a stored MetaSchedule trace produces from ``mod``, once
    the trace passed the gate (`UnsafeTrace` otherwise)."""
    from tvm.s_tir.schedule import Schedule, Trace

    trace = check_trace_text(trace_json)
    register_named_intrinsics(trace_json)  # tunehub's own intrinsics: this process may lack them
    sch = Schedule(mod)
    Trace.apply_json_to_schedule(trace, sch)
    return sch.mod


def build_library(mod: Any, target: Any, path: Path) -> Path:
    """Compile ``mod`` with `tvm.compile` and export it as a checked shared library at
    ``path`` (`tuning.checks.library_check.export_library`): what is verified, timed and
    served is that file. A module calling tunehub's bf16 dot product (`DPBF16PS`, which a
    trace may tensorize any bf16 block with) is refused for a target without AVX512-BF16, one
    with AMX tile instructions for a target without AMX-BF16 (`UnsafeLibrary`): its kernel
    would die of SIGILL where the target says it runs."""
    import tvm

    script, tvm_target = mod.script(), tvm.target.Target(target)
    if DPBF16PS in script and not has_bf16_dot(tvm_target):
        raise UnsafeLibrary(f"the kernel uses vdpbf16ps, which target {target} does not have")
    if TDPBF16PS in script and bf16_unit(tvm_target) != AMX:
        raise UnsafeLibrary(f"the kernel uses AMX tiles, which target {target} does not have")
    return export_library(tvm.compile(mod, target=target), path)


def compile_to_library(mod: Any, target: Any, path: Path) -> Any:
    """`build_library`, loaded back in this process: for modules this process trusts (the
    tests', the benchmarks'); the worker loads nothing itself (`tuning.measure.devices`)."""
    import tvm

    request_amx()  # a kernel on AMX tiles needs the tile state (False where there is none)
    return tvm.runtime.load_module(str(build_library(mod, target, path)))


def max_abs_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest absolute difference (inf when shapes differ or values are not finite)."""
    if actual.shape != expected.shape:
        return float("inf")
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    return float(np.max(diff)) if diff.size else 0.0


def check_close(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> float:
    """Raise `VerificationError` unless ``actual`` matches ``expected``; return the max error."""
    err = max_abs_error(actual, expected)
    if not np.isfinite(err) or not np.allclose(actual, expected, rtol=rtol, atol=atol):
        raise VerificationError(
            f"output differs from the reference: max |error| = {err:.3g} "
            f"(rtol={rtol:g}, atol={atol:g})"
        )
    return err
