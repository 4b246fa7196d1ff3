"""Registering TVM's tensor intrinsics (VNNI, SDOT, WMMA, ...) before a search needs them.

MetaSchedule's schedule rules look intrinsics up by name, so they must be registered in the
worker process. TVM registers them all by importing ``tvm.s_tir.tensor_intrin``, which takes
~30 s on a 2-core machine, 19 s of it for the CUDA ones. A worker that only serves CPU targets
registers the CPU families alone (about 1 s); any other target kind imports the whole package.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

PACKAGE = "tvm.s_tir.tensor_intrin"


def _is_arm(canonical: dict[str, Any]) -> bool:
    text = " ".join(str(canonical.get(k, "")) for k in ("mtriple", "mcpu", "keys")).lower()
    return "aarch64" in text or "arm" in text


def load_tensor_intrinsics(targets: list[dict[str, Any]]) -> list[str]:
    """Register the intrinsic families the canonical ``targets`` may use; returns the modules
    imported (``[PACKAGE]`` when the full set was needed)."""
    if any(t["kind"] != "llvm" for t in targets) or PACKAGE in sys.modules:
        importlib.import_module(PACKAGE)
        return [PACKAGE]
    import tvm.s_tir

    # A package object without its __init__: submodules import individually, and a later
    # `import tvm.s_tir.tensor_intrin` (MetaSchedule's default builder does one) is a no-op.
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(Path(tvm.s_tir.__file__).parent / "tensor_intrin")]
    package.__package__ = PACKAGE
    sys.modules[PACKAGE] = package
    tvm.s_tir.tensor_intrin = package
    families = [f"{PACKAGE}.x86"]
    if any(_is_arm(t) for t in targets):
        families.append(f"{PACKAGE}.arm_cpu")
    for name in families:
        setattr(package, name.rsplit(".", 1)[1], importlib.import_module(name))
    return families
