"""The bounds around a sandboxed child's whole process tree (`tuning.jail.isolated`'s):
per-child cgroups capping the tree's memory and process count, and a final sweep that kills
every process left under the child's uid."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger("tunehub.sandbox")

CGROUP_ROOT = Path("/sys/fs/cgroup")
_warned: list[bool] = []


def make_cgroups(uid: int, tree_memory: int, processes: int) -> list[Path]:
    """Per-child cgroups (v1 memory and pids controllers, or v2's unified tree) capping the
    whole tree's memory and process count; rlimits bound each process, these bound their sum
    (64 processes of 2 GiB each could otherwise exhaust the host). Best effort: none where the
    hierarchy is not writable (rlimits and the per-uid process limit still hold)."""
    # Swap counts too: memsw (v1, set after the memory limit it may not be below) or
    # swap.max (v2); where swap accounting is off, those files are missing and skipped.
    wanted = {"memory": {"memory.limit_in_bytes": tree_memory,
                         "memory.memsw.limit_in_bytes": tree_memory},
              "pids": {"pids.max": processes}}  # fmt: skip
    if (CGROUP_ROOT / "cgroup.controllers").exists():  # v2: one tree
        parents = {CGROUP_ROOT / "tunehub-sandbox": {"memory.max": tree_memory,
                                                     "memory.swap.max": 0,
                                                     "pids.max": processes}}  # fmt: skip
    else:
        parents = {CGROUP_ROOT / c / "tunehub-sandbox": files for c, files in wanted.items()}
    made = []
    for parent, files in parents.items():
        group = parent / str(uid)
        try:
            parent.mkdir(exist_ok=True)
            if (CGROUP_ROOT / "cgroup.controllers").exists():
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            group.mkdir()
        except OSError:
            continue
        try:
            for name, value in files.items():
                if ("swap" in name or "memsw" in name) and not (group / name).exists():
                    continue
                (group / name).write_text(str(value))
            made.append(group)
        except OSError:  # a group without its limit is no use: leave it out
            remove_cgroups([group])
    if len(made) < len(parents) and not _warned:
        _warned.append(True)
        log.warning(
            "sandbox: the cgroup hierarchy under %s is not writable here; each child's "
            "processes are bounded by rlimits alone (not their sum)",
            CGROUP_ROOT,
        )
    return made


def remove_cgroups(groups: list[Path]) -> None:
    for group in groups:
        for _ in range(50):  # killed processes leave their cgroup a moment after they die
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.02)


def _processes_of(uid: int) -> list[tuple[int, str]]:
    """(pid, /proc/<pid>/stat text) of every process whose real uid is ``uid``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as status:
                owner = next((line for line in status if line.startswith("Uid:")), "")
            if owner and int(owner.split()[1]) == uid:
                with open(f"/proc/{entry.name}/stat") as stat:
                    found.append((int(entry.name), stat.read()))
        except (OSError, ValueError):
            continue
    return found


def uid_cpu_seconds(uid: int) -> float:
    """CPU seconds used by the processes of ``uid`` and the children they reaped (a jail's
    first process reaps the whole tree, so nothing it ran is lost)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for _, text in _processes_of(uid):
        fields = text[text.rfind(")") + 2 :].split()  # after the name, which may hold spaces
        try:
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        except (ValueError, IndexError):
            continue
    return total / ticks


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (none should outlive its namespace; this makes sure)."""
    for pid, _ in _processes_of(uid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
