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
import math
import time
from dataclasses import dataclass, field
from typing import Any

from schedules_db.figures import is_quiet
from schedules_db.store import Store
from schedules_db.values import Target
from tuning.hardware.figures import Figures, measure_figures

log = logging.getLogger("tunehub.worker")


def record_figures(store: Store, target_id: int, figures: Figures) -> None:
    """Offer ``figures`` to the store, which keeps what it trusts most (see the module)."""
    bandwidth = figures.bandwidth
    store.catalog.set_peak(target_id, figures.peak_gflops, interference=figures.peak_interference)
    if figures.bf16_unit is not None and figures.bf16_peak_gflops is not None:
        store.catalog.set_bf16_peak(target_id, figures.bf16_unit, figures.bf16_peak_gflops,
                                    interference=figures.bf16_interference)  # fmt: skip
    store.catalog.set_bandwidth(
        target_id,
        bandwidth.cache_gbps,
        bandwidth.memory_gbps,
        bandwidth.cache_bytes,
        bandwidth.llc_gbps,
        bandwidth.llc_bytes,
        interference=figures.bandwidth_interference,
    )
    log.info("target %s: fp32 FMA peak %.0f GFLOPS; %s; bandwidth %.0f GB/s in cache (%d KiB), "
             "%s, %.0f GB/s in memory; %s", target_id, figures.peak_gflops, _bf16_words(figures),
             bandwidth.cache_gbps, bandwidth.cache_bytes >> 10,
             "no shared cache" if not bandwidth.llc_bytes else
             f"{bandwidth.llc_gbps:.0f} GB/s in the shared cache ({bandwidth.llc_bytes >> 10} KiB)",
             bandwidth.memory_gbps, _load_words(figures))  # fmt: skip


def _bf16_words(figures: Figures) -> str:
    """The bf16 peak, for the log."""
    if figures.bf16_unit is None or figures.bf16_peak_gflops is None:
        return "no bf16 unit"
    return f"bf16 peak {figures.bf16_peak_gflops:.0f} GFLOPS ({figures.bf16_unit})"


def _load_words(figures: Figures) -> str:
    """How busy the machine was, for the log."""
    loads = [figures.peak_interference, figures.bandwidth_interference]
    if figures.bf16_unit is not None:
        loads.append(figures.bf16_interference)
    if all(is_quiet(load) for load in loads):
        return "measured on a quiet machine"
    cores = " and ".join(_cores(load) for load in loads)
    return (f"measured under load ({cores} of other work on the cores they need): not trusted, "
            "measured again before the next job")  # fmt: skip


def _cores(value: float | None) -> str:
    return "an unknown amount" if value is None else f"{value:.2f} cores"


def _trusted(target: Target) -> bool:
    """Whether the store holds every figure of ``target`` from a quiet machine (the bf16 peak
    only where one was measured: a target without a bf16 unit has none to trust)."""
    bf16_ok = target.bf16_peak_gflops is None or target.bf16_peak_trusted
    return target.peak_trusted and target.bandwidth_trusted and bf16_ok


@dataclass
class FiguresKeeper:
    """Measures CPU targets' figures and offers them to the store: at a worker's start
    (`measure_all`), and again before a job (`refresh`) while the store holds none measured on
    a quiet machine, at most once per ``every_s`` per target (a machine that stays busy costs a
    job a few seconds, not every job)."""

    store: Store
    every_s: float = 60.0
    _last: dict[int, float] = field(default_factory=dict)

    def measure_all(
        self, target_ids: list[int], canonicals: list[dict[str, Any]]
    ) -> dict[str, float]:
        """Measure each CPU target's figures on this machine (a few seconds each) and offer
        them to the store; {target id: GFLOPS measured} for the worker's fingerprint."""
        found = {}
        for target_id, canonical in zip(target_ids, canonicals, strict=True):
            figures = self._measure(target_id, canonical)
            if figures is not None:
                found[str(target_id)] = round(figures.peak_gflops, 1)
        return found

    def refresh(self, target: Target, canonical: dict[str, Any]) -> Target:
        """``target`` as the store holds it after measuring it again if its figures are not
        trusted and it is time; unchanged otherwise, and when measuring fails (logged: a job
        never fails for it, it only searches without a roofline)."""
        if canonical.get("kind") != "llvm" or _trusted(target):
            return target
        if time.monotonic() - self._last.get(target.id, -math.inf) < self.every_s:
            return target
        try:
            if self._measure(target.id, canonical) is None:
                return target
        except Exception:  # noqa: BLE001 - see above
            log.exception("target %s: measuring its figures again failed", target.id)
            return target
        return self.store.catalog.get_target(target.id) or target

    def _measure(self, target_id: int, canonical: dict[str, Any]) -> Figures | None:
        self._last[target_id] = time.monotonic()
        figures = measure_figures(canonical)
        if figures is not None:
            record_figures(self.store, target_id, figures)
        return figures
