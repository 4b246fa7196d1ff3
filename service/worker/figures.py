"""A worker's roofline figures: measured at its start, measured again until they are trusted.

A worker measures each CPU target's peak and bandwidth when it starts
(`tuning.hardware.figures`), together with how busy other processes kept its cores meanwhile.
A worker started beside someone's work (a server starting, a client importing PyTorch) measures
too low, and a roofline from such a figure would call an 84% kernel 100% and stop its search.
So the store keeps the best figure measured on a quiet machine, and one measured under load
only while there is none (`schedules_db.store.catalog.CatalogRows.set_peak`); no roofline is
derived from a loaded figure (`tuning.hardware.roofline.roofline_us`); and before each job on a
target whose kept figures are not quiet, the worker measures them again (`FiguresKeeper`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from schedules_db.store import Store
from schedules_db.values import Target
from tuning.hardware.figures import Figures, measure_figures
from tuning.hardware.roofline import QUIET_SHARE, is_quiet

log = logging.getLogger("tunehub.worker")


def record_figures(store: Store, target_id: int, figures: Figures) -> None:
    """Offer ``figures`` to the store, which keeps what it trusts most (see the module)."""
    bandwidth = figures.bandwidth
    store.catalog.set_peak(
        target_id,
        figures.peak_gflops,
        interference=figures.peak_interference,
        quiet_at_most=QUIET_SHARE,
    )
    store.catalog.set_bandwidth(
        target_id,
        bandwidth.cache_gbps,
        bandwidth.memory_gbps,
        bandwidth.cache_bytes,
        bandwidth.llc_gbps,
        bandwidth.llc_bytes,
        interference=figures.bandwidth_interference,
        quiet_at_most=QUIET_SHARE,
    )
    log.info("target %s: fp32 FMA peak %.0f GFLOPS; bandwidth %.0f GB/s in cache (%d KiB), "
             "%s, %.0f GB/s in memory; %s", target_id, figures.peak_gflops,
             bandwidth.cache_gbps, bandwidth.cache_bytes >> 10,
             "no shared cache" if not bandwidth.llc_bytes else
             f"{bandwidth.llc_gbps:.0f} GB/s in the shared cache ({bandwidth.llc_bytes >> 10} KiB)",
             bandwidth.memory_gbps, _load_words(figures))  # fmt: skip


def _load_words(figures: Figures) -> str:
    """How busy the machine was, for the log."""
    if figures.quiet:
        return "measured on a quiet machine"
    return (f"measured under load (other processes took {_share(figures.peak_interference)} "
            f"and {_share(figures.bandwidth_interference)} of the cores): not trusted, "
            "measured again before the next job")  # fmt: skip


def _share(value: float | None) -> str:
    return "an unknown share" if value is None else f"{value:.0%}"


def measure_peaks(
    store: Store, target_ids: list[int], canonicals: list[dict[str, Any]]
) -> dict[str, float]:
    """Measure each CPU target's figures on this machine (a few seconds each) and offer them to
    the store; returns {target id: GFLOPS measured} for the worker's fingerprint."""
    found = {}
    for target_id, canonical in zip(target_ids, canonicals, strict=True):
        figures = measure_figures(canonical)
        if figures is not None:
            record_figures(store, target_id, figures)
            found[str(target_id)] = round(figures.peak_gflops, 1)
    return found


@dataclass
class FiguresKeeper:
    """Measures a target's figures again before a job while the store holds none measured on a
    quiet machine; at most once per ``every_s`` per target (a machine that stays busy costs a
    job a few seconds, not every job)."""

    store: Store
    every_s: float = 60.0
    _last: dict[int, float] = field(default_factory=dict)

    def refresh(self, target: Target, canonical: dict[str, Any]) -> Target:
        """``target`` as the store holds it after measuring it again if its figures are not
        trusted (`is_quiet`) and it is time; unchanged otherwise."""
        if canonical.get("kind") != "llvm":
            return target
        if is_quiet(target.peak_interference) and is_quiet(target.bandwidth_interference):
            return target
        now = time.monotonic()
        if now - self._last.get(target.id, -self.every_s) < self.every_s:
            return target
        self._last[target.id] = now
        figures = measure_figures(canonical)
        if figures is None:
            return target
        record_figures(self.store, target.id, figures)
        return self.store.catalog.get_target(target.id) or target
