"""How many threads TVM's CPU runtime gives a target's kernels.

TVM sizes its thread pool once per process, from ``TVM_NUM_THREADS`` (or ``OMP_NUM_THREADS``),
else from ``std::thread::hardware_concurrency()`` *halved on x86*, on the assumption that every
core runs two hyper-threads. On a machine whose logical CPUs are all cores (this 2-vCPU VM: one
thread per core) that is half the machine: every candidate was measured, verified and served as
a one-core kernel while OpenBLAS and oneDNN used both cores. Measured here (hand-written packed
512^3 fp32 matmul): 205 GFLOPS by default, 401-428 GFLOPS with ``TVM_NUM_THREADS=2``.

A llvm target says how many cores its kernels may use (``num-cores``); the worker's jailed kernel
runner (`tuning.measure.kernel_jail`) runs each job's measurements, verification and timing with
that many threads (``TVM_NUM_THREADS`` in its environment), and the worker pins its own pool
for what it runs itself (the peak measurement).
"""

from __future__ import annotations

import os
from typing import Any

from tuning.hardware.host import physical_cores

ENV = "TVM_NUM_THREADS"
_BIG_CORES = 1  # TVM's ThreadGroup::AffinityMode::kBig


def target_threads(canonical: dict[str, Any]) -> int | None:
    """Threads a CPU kernel of this canonical target should run on (its ``num-cores``, else
    this machine's physical cores); None for non-CPU targets."""
    if canonical.get("kind") != "llvm":
        return None
    cores = canonical.get("num-cores")
    return int(cores) if cores else physical_cores()


def pin_runtime_threads(threads: int) -> int:
    """Make TVM kernels run on ``threads`` threads in this process and in the processes it
    starts from now on (MetaSchedule's builder and runner pools read the environment).

    The pool of this process is sized when its first parallel kernel runs: called before that,
    any count up to the machine's CPUs takes effect; after it, counts above the pool's size are
    capped to it. Returns the threads this process's runtime now uses."""
    import tvm

    threads = max(1, min(int(threads), os.cpu_count() or int(threads)))
    os.environ[ENV] = str(threads)
    tvm.get_global_func("runtime.config_threadpool")(_BIG_CORES, threads)
    return int(tvm.runtime.num_threads())
