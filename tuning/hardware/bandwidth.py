"""The memory bandwidth of a CPU target, measured on this machine the way its peak is
(`tuning.hardware.peak`): a kernel compiled by TVM for the target, on its threads, timed with
TVM's evaluator. Three figures, because the tasks of a model live at three levels:

- **cache**: each thread streams a slice that fits in its core's L2 (a softmax of 12x128x128
  floats moves 1.5 MB in all: it never leaves the caches between two runs);
- **last-level cache**: the threads together stream half of the shared L3, at most
  `LLC_SLICE` per thread and array (a ResNet max pool moves 4 MB: more than the L2s hold, yet
  it never goes to DRAM between the conv that writes it and the pool; measured at 29 GB/s from
  memory, it would be 137 us while it runs in 76); absent where the machine reports no L3
  larger than its L2s, or where streaming it is not `LLC_GAIN` times faster than memory;
- **memory**: each thread streams a slice far larger than any cache (DRAM).

Bytes are counted as STREAM counts them: what the kernel reads plus what it writes (a write
that first reads its line in counts once), so a task's bytes (`tuning.ir.bytes_moved`: its
parameters, each once) divided by the bandwidth of the level its bytes fit in is the least time
any kernel could take to move them (`tuning.hardware.roofline`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tuning.hardware.roofline import Bandwidth
from tuning.hardware.vectors import vector_bits

CACHE_SLICE = 512 * 1024  # bytes per thread per array: two arrays fit in any x86 L2 since 2008
MEMORY_SLICE = 64 * 1024 * 1024  # bytes per thread per array: past every cache we measure
# A VM is told the whole socket's L3 (480 MiB on a 2-core Xeon VM here), of which its cores get
# a share: half of it streamed at memory speed (23 GB/s), 4 MiB per thread and array at 53
# (C loop; memory 20, L2 102). Zen 5's 32 MiB L3 on 2 threads gives 4 MiB anyway.
LLC_SLICE = 4 * 1024 * 1024
LLC_GAIN = 1.25  # an L3 level no faster than this times memory is no level of its own


def cache_bytes(level: int) -> int | None:
    """The size of this machine's level-``level`` data cache as one core sees it (sysfs; an L3
    is the whole shared cache), or None when it does not say."""
    try:
        for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
            kind = (index / "type").read_text().strip()
            if (index / "level").read_text().strip() == str(level) and kind != "Instruction":
                size = (index / "size").read_text().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
                return int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return None


def measured_bandwidth(target: dict[str, Any], threads: int, lanes: int) -> Bandwidth:
    """Cache, last-level cache and memory bandwidth on ``threads`` threads of TVM's pool (each
    thread scales its own slice: y = 2 x, ``lanes``-wide vectors), compiled by TVM for
    ``target``, best of a few runs (about a second in all). The caller's pool must have
    ``threads`` threads (`tuning.hardware.threads.pin_runtime_threads`)."""
    # Two arrays per thread in at most half of its L2: the other half holds what else runs.
    cache_slice = max(64 * 1024, min(CACHE_SLICE, (cache_bytes(2) or 1 << 20) // 4))
    cache = _stream_gbps(target, threads, lanes, cache_slice, passes=100)
    memory = _stream_gbps(target, threads, lanes, MEMORY_SLICE, passes=1)
    # The same for the shared L3: all threads' arrays in half of it (or `LLC_SLICE` each).
    llc_slice = llc_slice_bytes(threads)
    if llc_slice > 2 * cache_slice:
        llc = _stream_gbps(target, threads, lanes, llc_slice, passes=10)
        if llc >= LLC_GAIN * memory:
            return Bandwidth(cache, memory, 2 * cache_slice * threads, llc, 2 * llc_slice * threads)
    return Bandwidth(cache, memory, cache_bytes=2 * cache_slice * threads)


def llc_slice_bytes(threads: int) -> int:
    """Bytes per thread and array the last-level cache is measured with: a quarter of the L3
    over ``threads`` (two arrays each: half of it in all), at most `LLC_SLICE`, whole pages;
    0 where the machine reports no L3."""
    return min(LLC_SLICE, (cache_bytes(3) or 0) // 4 // threads) // 4096 * 4096


def _stream_gbps(
    target: dict[str, Any], threads: int, lanes: int, slice_bytes: int, passes: int
) -> float:
    """GB/s of ``passes`` passes per call over ``slice_bytes`` per thread and array, each pass
    y = 2 x then x = y / 2 (the next pass reads what this one wrote: no pass can be elided, and
    a call is long enough that the pool's start costs nothing)."""
    import tvm
    from tvm.script import tirx as T

    width = max(lanes, slice_bytes // 4 // lanes * lanes)
    blocks = width // lanes

    # TVMScript: its parameter annotations are calls, which no type checker reads.
    @T.prim_func(check_well_formed=False)  # type: ignore[untyped-decorator]
    def stream(x: T.Buffer((threads, width), "float32"), y: T.Buffer((threads, width), "float32")):  # type: ignore[valid-type,no-untyped-def]  # noqa: E501
        for t in T.parallel(threads):
            for _ in range(passes):
                for b in range(blocks):
                    for v in T.vectorized(lanes):
                        y[t, b * lanes + v] = x[t, b * lanes + v] * T.float32(2)
                for b in range(blocks):
                    for v in T.vectorized(lanes):
                        x[t, b * lanes + v] = y[t, b * lanes + v] * T.float32(0.5)

    lib = tvm.compile(tvm.IRModule({"main": stream}), target=tvm.target.Target(target)).mod
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    args = [
        tvm.runtime.tensor(rng.random((threads, width), dtype=np.float32), dev),
        tvm.runtime.empty((threads, width), "float32", dev),
    ]
    secs = min(lib.time_evaluator("main", dev, number=1, repeat=7, min_repeat_ms=50)(*args).results)
    return float(2 * passes * 2 * threads * width * 4 / secs / 1e9)


def target_bandwidth(canonical: dict[str, Any]) -> Bandwidth | None:
    """The measured bandwidth of an llvm target on this machine (on its ``num-cores`` threads,
    vectors as wide as the peak's); None for other kinds."""
    import tvm

    if canonical.get("kind") != "llvm":
        return None
    threads = int(canonical.get("num-cores", 1))
    lanes = max(4, vector_bits(tvm.target.Target(canonical)) // 32)
    return measured_bandwidth(canonical, threads, lanes)
