"""TVM's thread pool sized as the worker sized it when it measured a kernel (`load_kernel`'s).

TVM 0.27 keeps one pool per calling thread, started by its first parallel kernel with
``TVM_NUM_THREADS`` threads, else half an x86 machine's CPUs; a started pool can shrink but
never grow. `pin_threads` sizes the calling thread's pool (and those started later) and says
loudly (`ThreadPoolWarning`) when it cannot.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

THREADS_ENV = "TVM_NUM_THREADS"  # read by TVM when a thread's pool starts, and by child processes
_BIG_CORES = 1  # TVM's ThreadGroup::AffinityMode::kBig, as the worker pins its pools
_POOL = threading.local()  # .threads: what pin_threads last sized this thread's TVM pool to


class ThreadPoolWarning(RuntimeWarning):
    """TVM's thread pool of the calling thread runs on fewer threads than the kernel was
    measured with (it started before the kernel set it, or this machine has fewer CPUs)."""


def pinned_threads() -> int | None:
    """What `pin_threads` last sized the calling thread's pool to (None: never, here)."""
    threads: int | None = getattr(_POOL, "threads", None)
    return threads


def machine_cpus() -> int:
    """This machine's logical CPUs. Not the calling thread's affinity mask: TVM narrows that when
    it pins a pool (a one-thread pool pins its Python thread to one CPU)."""
    return os.cpu_count() or 1


def physical_cores() -> int:
    """This machine's physical cores (Linux topology; the CPU count elsewhere): what the worker
    gives a target that names no ``num-cores``."""
    cores: set[tuple[str, str]] = set()
    for topology in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        try:
            package = (topology / "physical_package_id").read_text().strip()
            cores.add((package, (topology / "core_id").read_text().strip()))
        except OSError:
            return machine_cpus()
    return len(cores) or machine_cpus()


def pin_threads(threads: int) -> int:
    """Size the calling thread's TVM pool to ``threads`` and make pools started later (other
    threads, child processes) start with as many. Returns the threads the pool now runs on.

    TVM 0.27 keeps one pool per calling thread, started by its first parallel kernel (or a
    ``tvm.runtime.num_threads()`` / ``runtime.config_threadpool`` call) with
    ``TVM_NUM_THREADS`` threads, else half an x86 machine's CPUs; a started pool can shrink
    but never grow. A pool left smaller than ``threads`` gets a `ThreadPoolWarning`. As in the
    worker, the pool is pinned to the machine's big cores, and the calling thread (which runs
    one share of every kernel) with it: on fewer threads than CPUs, that thread keeps to
    ``threads`` CPUs, as the measured process did."""
    import tvm

    os.environ[THREADS_ENV] = str(threads)
    tvm.get_global_func("runtime.config_threadpool")(_BIG_CORES, threads)
    running = int(tvm.runtime.num_threads())
    _POOL.threads = threads
    if running < threads:
        warnings.warn(
            ThreadPoolWarning(
                f"this kernel was measured on {threads} threads but runs on {running}: TVM's "
                f"thread pool of this Python thread had started with {running} before the "
                "kernel first ran in it (other TVM code ran a kernel or read "
                "tvm.runtime.num_threads() first), and TVM cannot grow a started pool. Load "
                "kernels before running other TVM code in the thread, or start Python with "
                f"{THREADS_ENV}={threads}."
            ),
            stacklevel=3,
        )
    return running


def threads_for(canonical: Mapping[str, Any], threads: int | None) -> int | None:
    """The thread count a kernel of this target runs on: ``threads``, else the target's
    ``num-cores``, else this machine's physical cores, capped (with a warning) to its CPUs; None
    for a non-CPU target."""
    if canonical.get("kind") != "llvm":
        if threads is not None:
            kind = canonical.get("kind")
            raise ValueError(f"threads: only CPU (llvm) targets have a thread pool, not {kind!r}")
        return None
    wanted: Any = threads if threads is not None else canonical.get("num-cores", physical_cores())
    field = "threads" if threads is not None else "target num-cores"
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
        raise ValueError(f"{field}: a thread count must be a positive integer (got {wanted!r})")
    cpus = machine_cpus()
    if wanted > cpus:
        warnings.warn(
            ThreadPoolWarning(
                f"{field} asks for {wanted} threads but this machine has {cpus} CPUs: the "
                f"kernel runs on {cpus} and will be slower than it was measured"
            ),
            stacklevel=3,
        )
    return min(wanted, cpus)
