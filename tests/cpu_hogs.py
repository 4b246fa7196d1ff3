"""Processes that keep this machine's cores busy, for tests of what a measurement does under
load: one spinning Python process per core, started and running before the block begins."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.waiting import eventually


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@contextmanager
def cpu_hogs(count: int | None = None) -> Iterator[list[int]]:
    """``count`` (default: one per CPU this process may use) busy-looping processes, each seen
    on a core before the block starts; killed after it. Yields their pids."""
    count = count or len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        for hog in hogs:  # each has run for a few ticks: it is spinning, not starting
            eventually(lambda hog=hog: _cpu_ticks(hog.pid) >= 5, 30, what="a hog to spin")
        yield [hog.pid for hog in hogs]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
