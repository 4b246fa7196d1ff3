"""How much other work shared this process's cores while it measured something.

A peak or a bandwidth measured while another process holds a core is too low (TVM's pool waits
for its slowest thread: a worker started beside a client importing PyTorch measured 377 GFLOPS
where the C FMA loop gives 451), and a roofline from it calls an 84% kernel 100% and stops its
search. So every figure is measured inside `Interference`, which reads the kernel's accounting
(/proc/stat for the CPUs this process may run on, /proc/self/stat for its own time, all its
threads) before and after: the other work (other processes, the hypervisor's steal) in cores'
worth, less the CPUs the measurement leaves free (a 2-thread measurement on 16 CPUs is not
slowed by one busy process; on 2 CPUs it is). Linux only; elsewhere it is unknown (None),
which no caller trusts. Standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest is in user)
_ALL_FIELDS = 8  # the eight above plus idle and iowait: the cores' elapsed time


@dataclass(frozen=True)
class CpuTicks:
    """Clock ticks so far: the cores' busy time, their elapsed time, and this process's own."""

    busy: int
    total: int
    own: int


def read_ticks() -> CpuTicks | None:
    """The kernel's tick counters for the cores in this process's affinity mask and for this
    process; None where /proc does not have them."""
    try:
        cpus = {f"cpu{n}" for n in os.sched_getaffinity(0)}
        busy = total = 0
        for line in Path("/proc/stat").read_text().splitlines():
            name, *fields = line.split()
            if name in cpus:
                values = [int(v) for v in fields[:_ALL_FIELDS]]
                busy += sum(values[i] for i in _BUSY_FIELDS)
                total += sum(values)
        # /proc/self/stat: the name in parentheses may hold spaces; utime and stime are the
        # 14th and 15th fields, the 12th and 13th after it.
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        own = int(after_name[11]) + int(after_name[12])
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return CpuTicks(busy, total, own) if total else None


def others_cores(
    before: CpuTicks | None, after: CpuTicks | None, cpus: int, threads: int
) -> float | None:
    """The cores' worth of work other than this process's between ``before`` and ``after`` on
    ``cpus`` CPUs, beyond the ``cpus - threads`` a ``threads``-thread measurement leaves free
    (0: none of it can have slowed the measurement); None when either is unknown or no tick
    passed."""
    if before is None or after is None or after.total <= before.total or cpus < 1:
        return None
    others = max(0, (after.busy - before.busy) - (after.own - before.own))
    cores = others / ((after.total - before.total) / cpus)
    return max(0.0, cores - max(0, cpus - threads))


class Interference:
    """``with Interference(threads) as load: ...``; then ``load.cores`` is `others_cores` over
    the block for a measurement on ``threads`` threads (None while it runs, or where it is
    unknown)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._before: CpuTicks | None = None
        self.cores: float | None = None

    def __enter__(self) -> Interference:
        self._before = read_ticks()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        cpus = len(os.sched_getaffinity(0))
        self.cores = others_cores(self._before, read_ticks(), cpus, self.threads)
