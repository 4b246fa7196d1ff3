"""When a target's measured peak or bandwidth is trusted: the store keeps the best quiet figure
(`schedules_db.store.catalog.CatalogRows.set_peak`), its '% peak' sort and the targets' values
(`schedules_db.values.Target.peak_trusted`) read the same rule."""

from __future__ import annotations

QUIET_CORES = 0.1
"""A target's peak or bandwidth measured while other processes took at most this many cores'
worth of the cores its kernels need (`tuning.hardware.interference`) is trusted; one measured
under more load is shown with its load, but no roofline is derived from it (it would call a
slower kernel 100% of its roofline and stop its search). Idle machines measure 0.00-0.02 here;
a second busy process beside a 2-core measurement, about 0.7."""


def is_quiet(interference: float | None) -> bool:
    """Whether a figure measured under ``interference`` (None: not known) is trusted."""
    return interference is not None and interference <= QUIET_CORES
