"""TVM's CPU thread pool: its x86 default (half the CPUs) and the worker's pinning to the target."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from tuning.hardware.host import physical_cores
from tuning.hardware.threads import ENV, target_threads

CPUS = os.cpu_count() or 1


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in (ENV, "OMP_NUM_THREADS")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.strip()


def test_target_threads_come_from_the_targets_cores() -> None:
    assert target_threads({"kind": "llvm", "mcpu": "znver4", "num-cores": 3}) == 3
    assert target_threads({"kind": "llvm"}) == physical_cores()
    assert target_threads({"kind": "cuda", "arch": "sm_90"}) is None


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 default only")
def test_tvm_alone_uses_half_the_cpus_on_x86() -> None:
    """Why the worker pins: without it, every kernel runs on half of this machine's cores."""
    default = _python("import tvm; print(tvm.runtime.num_threads())")
    assert int(default) == max(1, CPUS // 2)


def test_pinning_gives_the_target_its_cores_here_and_in_child_processes() -> None:
    code = (
        "import subprocess, sys\n"
        "from tuning.hardware.threads import pin_runtime_threads\n"
        f"print(pin_runtime_threads({CPUS}))\n"
        "child = 'import tvm; print(tvm.runtime.num_threads())'\n"
        "print(subprocess.run([sys.executable, '-c', child], capture_output=True, text=True,"
        " check=True).stdout.strip())\n"
        # Lowering later takes effect too (a worker serving a 1-core and a 2-core target).
        "print(pin_runtime_threads(1))\n"
    )
    here, child, lowered = _python(code).split()
    assert (int(here), int(child), int(lowered)) == (CPUS, CPUS, 1)


def test_counts_above_the_machine_are_capped() -> None:
    assert int(_python(f"from tuning.hardware.threads import pin_runtime_threads\n"
                       f"print(pin_runtime_threads({CPUS + 6}))")) == CPUS  # fmt: skip
