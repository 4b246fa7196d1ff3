"""The wheel installs four top-level packages (`service`, `tuning`, `schedules_db`,
`schedule_reads`), as the repository lays them out. `service` is a name another distribution
may use too; pip would then write both into one folder without a word. A server or a worker
refuses to start in such an environment, naming the other distribution, instead of running a
mix of two projects' files."""

from __future__ import annotations

from importlib.metadata import packages_distributions

DISTRIBUTION = "tunehub"
TOP_LEVEL = ("service", "tuning", "schedules_db", "schedule_reads")


def clashes() -> dict[str, list[str]]:
    """Each of tunehub's top-level names that another installed distribution also claims, with
    those distributions (empty when none does)."""
    claimed = packages_distributions()
    found = {}
    for name in TOP_LEVEL:
        others = sorted({d for d in claimed.get(name, []) if d.lower() != DISTRIBUTION})
        if others:
            found[name] = others
    return found


def clash_refusal() -> str | None:
    """Why this environment cannot run tunehub's server side, or None."""
    found = clashes()
    if not found:
        return None
    listed = "; ".join(f"{name!r} is also installed by {', '.join(d)}" for name, d in found.items())
    return (
        f"{listed}: their files and tunehub's share one folder. Install tunehub in a virtual "
        "environment of its own."
    )
