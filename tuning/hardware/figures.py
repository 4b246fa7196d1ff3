"""A CPU target's roofline figures, each measured with the other work its cores saw.

`measure_figures` runs the peak (`tuning.hardware.peak`), the bf16 peak where the target has a
bf16 unit (`tuning.hardware.peak_bf16`) and the bandwidth (`tuning.hardware.bandwidth`), each
inside `tuning.hardware.interference.Interference`, so that the store keeps the figures it can
trust and a worker measures again the ones it cannot (`service.worker.figures`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tuning.hardware.bandwidth import target_bandwidth
from tuning.hardware.interference import Interference
from tuning.hardware.peak import target_peak_gflops
from tuning.hardware.peak_bf16 import target_bf16_peak
from tuning.hardware.roofline import Bandwidth
from tuning.hardware.threads import target_threads

log = logging.getLogger("tunehub.figures")


@dataclass(frozen=True)
class Figures:
    """The peak (GFLOPS) and bandwidth a CPU target reached here, and the cores' worth of other
    work its cores saw while each was measured (None: not known); the bf16 peak and its unit
    (`tuning.hardware.bf16`) where the target has one (else None)."""

    peak_gflops: float
    peak_interference: float | None
    bandwidth: Bandwidth
    bandwidth_interference: float | None
    bf16_unit: str | None = None
    bf16_peak_gflops: float | None = None
    bf16_interference: float | None = None


def measure_figures(canonical: dict[str, Any]) -> Figures | None:
    """Measure an llvm target's peak and bandwidth on this machine (a few seconds; the
    caller's TVM pool must have the target's threads); None for other kinds."""
    threads = target_threads(canonical)
    if threads is None:
        return None
    with Interference(threads) as peak_load:
        peak = target_peak_gflops(canonical)
    with Interference(threads) as bf16_load:
        try:
            bf16 = target_bf16_peak(canonical)
        except Exception:  # noqa: BLE001 - the fp32 figures still count; the log says why
            log.exception("measuring the bf16 peak of %s failed", canonical)
            bf16 = None
    with Interference(threads) as bandwidth_load:
        bandwidth = target_bandwidth(canonical)
    if peak is None or bandwidth is None:
        return None
    if bf16 is None:
        return Figures(peak, peak_load.cores, bandwidth, bandwidth_load.cores)
    return Figures(peak, peak_load.cores, bandwidth, bandwidth_load.cores, *bf16, bf16_load.cores)
