"""Registering TVM's tensor intrinsics (VNNI, SDOT, WMMA, ...) before a search needs them.

MetaSchedule's schedule rules look intrinsics up by name, so they must be registered in the
worker process. TVM registers them all by importing ``tvm.s_tir.tensor_intrin``, which takes
~30 s on a 2-core machine, 19 s of it for the CUDA ones. A worker that only serves CPU targets
registers the CPU families alone (about 1 s); other kinds register their own family.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

from tuning.hardware.bf16 import register_bf16_intrinsics

PACKAGE = "tvm.s_tir.tensor_intrin"


def _is_arm(canonical: dict[str, Any]) -> bool:
    text = " ".join(str(canonical.get(k, "")) for k in ("mtriple", "mcpu", "keys")).lower()
    return "aarch64" in text or "arm" in text


FAMILIES_BY_KIND = {"llvm": ["x86"], "cuda": ["cuda"], "rocm": ["rocm"], "metal": ["metal"]}
ALL_FAMILIES = ["cuda", "x86", "arm_cpu", "rocm", "hexagon", "riscv_cpu", "metal"]


def _families(target: dict[str, Any]) -> list[str]:
    families = list(FAMILIES_BY_KIND.get(target["kind"], ALL_FAMILIES))
    if target["kind"] == "llvm" and _is_arm(target):
        families.append("arm_cpu")
    return families


def load_tensor_intrinsics(targets: list[dict[str, Any]]) -> list[str]:
    """Register the intrinsic families the canonical ``targets`` may use (x86 for llvm, with
    tunehub's bf16 dot product, plus Arm for Arm triples; cuda, rocm, metal for those kinds;
    every family for anything else). Idempotent; returns the modules imported by this call."""
    import tvm.s_tir

    package = sys.modules.get(PACKAGE)
    if package is None:
        # A package object without its __init__: submodules import one by one, and a later
        # `import tvm.s_tir.tensor_intrin` (MetaSchedule's default builder does one) is a no-op.
        package = types.ModuleType(PACKAGE)
        package.__path__ = [str(Path(tvm.s_tir.__file__).parent / "tensor_intrin")]
        package.__package__ = PACKAGE
        sys.modules[PACKAGE] = package
        tvm.s_tir.tensor_intrin = package
    wanted = dict.fromkeys(f for t in targets for f in _families(t))
    if "x86" in wanted:
        register_bf16_intrinsics()  # tunehub's own (`tuning.hardware.bf16`)
    loaded = []
    for family in wanted:
        name = f"{PACKAGE}.{family}"
        if name not in sys.modules:
            setattr(package, family, importlib.import_module(name))
            loaded.append(name)
    return loaded
