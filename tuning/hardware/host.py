"""This host: its llvm target (mcpu, the vector features it lacks, its cores), its hardware
fingerprint, and the TVM series of this process."""

from __future__ import annotations

import copy
import functools
import os
import platform
from typing import Any

from schedule_reads.keys import tvm_series
from tuning.hardware.bf16 import request_amx


def physical_cores() -> int:
    """Physical cores of this machine (measurements should not share a core's two threads)."""
    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def host_target_spec() -> dict[str, Any]:
    """The llvm target of this machine: its mcpu, the vector ISA features that mcpu implies but
    this CPU does not offer switched off (``mattr``), and its physical core count.

    LLVM names the CPU by family and model, and the name implies an ISA: a Zen 4 whose hypervisor
    hides AVX-512 is still ``znver4``, and code built for plain ``znver4`` dies there with SIGILL.
    AMX counts as offered only where the OS also grants this process the tile state
    (`tuning.hardware.bf16.request_amx`).
    """
    return copy.deepcopy(_host_target_spec())  # callers may change their copy


@functools.cache
def _host_target_spec() -> dict[str, Any]:
    """`host_target_spec`, worked out once per process (~7 ms: several LLVM target lookups)."""
    from tvm.target.codegen import llvm_get_system_cpu

    spec: dict[str, Any] = {"kind": "llvm", "mcpu": llvm_get_system_cpu()}
    disabled = missing_vector_features(spec, usable_cpu_flags())
    if disabled:
        spec["mattr"] = [f"-{feature}" for feature in disabled]
    spec["num-cores"] = physical_cores()
    return spec


VECTOR_FEATURE_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "amx", "gfni", "vaes", "vpclmul")


CPUINFO_ALIASES = {"pni": "sse3"}  # /proc/cpuinfo's names where they differ from LLVM's


def normalized_feature(feature: str) -> str:
    """A CPU feature's name in one spelling for LLVM's and /proc/cpuinfo's lists (``sse4.1``,
    ``sse4_1`` -> ``sse41``)."""
    return CPUINFO_ALIASES.get(feature, feature).replace("_", "").replace(".", "").replace("-", "")


def cpu_flags() -> set[str] | None:
    """The ISA flags /proc/cpuinfo lists for this CPU, normalised to LLVM's spelling without
    punctuation (``sse4_1`` -> ``sse41``); None where there is no x86 ``flags`` line to read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return {normalized_feature(flag) for flag in line.split(":", 1)[1].split()}
    except OSError:
        pass
    return None


def usable_cpu_flags() -> set[str] | None:
    """`cpu_flags` less the AMX ones when the OS refuses this process the tile state (a VM may
    list them in CPUID and still refuse: the first tile instruction would be SIGILL)."""
    flags = cpu_flags()
    if flags is None or not any(f.startswith("amx") for f in flags) or request_amx():
        return flags
    return {f for f in flags if not f.startswith("amx")}


def missing_vector_features(spec: dict[str, Any], flags: set[str] | None) -> list[str]:
    """The fewest LLVM features to switch off so that ``spec`` implies no vector ISA feature
    outside ``flags`` (switching ``avx512f`` off takes every AVX-512 extension with it).

    Empty when ``flags`` is None (nothing known about the CPU) or nothing is missing."""
    from tvm.target import Target
    from tvm.target.codegen import llvm_get_cpu_features

    if flags is None:
        return []

    def unsupported(disabled: list[str]) -> set[str]:
        attrs = dict(spec, mattr=[f"-{f}" for f in disabled]) if disabled else spec
        implied = llvm_get_cpu_features(Target(attrs))
        vector = [f for f in implied if f.startswith(VECTOR_FEATURE_PREFIXES)]
        return {f for f in vector if normalized_feature(f) not in flags}

    disabled: list[str] = []
    left = unsupported(disabled)
    while left:
        # Greedy: the feature whose removal takes the most unsupported ones with it.
        best = min(sorted(left), key=lambda f: len(unsupported([*disabled, f])))
        disabled.append(best)
        left = unsupported(disabled)
    return disabled


def host_fingerprint() -> dict[str, Any]:
    """What this host is: CPU model, cores, ISA flags of interest, TVM version."""
    import tvm

    cpu_model = ""
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name") and not cpu_model:
                    cpu_model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    wanted = ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16")
                    flags = [f for f in line.split(":", 1)[1].split() if f in wanted]
                    break
    except OSError:
        pass
    return {
        "cpu_model": cpu_model or platform.processor(),
        "physical_cores": physical_cores(),
        "logical_cores": os.cpu_count(),
        "isa_flags": sorted(set(flags)),
        "gpus": gpu_fingerprint(),
        "tvm_version": tvm.__version__,
    }


def gpu_fingerprint() -> list[dict[str, Any]]:
    """Name and compute capability of each CUDA device TVM sees (none on CPU-only hosts)."""
    import tvm

    gpus = []
    for index in range(16):
        try:
            dev = tvm.cuda(index)
            if not dev.exist:
                break
            gpus.append({"name": dev.device_name, "compute_capability": dev.compute_version})
        except Exception:  # a TVM built without CUDA, or no driver
            break
    return gpus


def current_tvm_series() -> str:
    """The TVM series (major.minor) of this process: the part of a record's key that says which
    TVM may replay it ("0.27.0.post1" -> "0.27"), spelled by `schedule_reads.keys.tvm_series`
    as the store spells a stored record's."""
    import tvm

    return tvm_series(tvm.__version__)
