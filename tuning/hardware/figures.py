"""A CPU target's roofline figures, each measured with how busy the machine was meanwhile.

`measure_figures` runs the peak (`tuning.hardware.peak`) and the bandwidth
(`tuning.hardware.bandwidth`) inside `tuning.hardware.interference.Interference`, so a worker
knows which of its figures it can trust (`tuning.hardware.roofline.is_quiet`) and measures
again the ones it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuning.hardware.bandwidth import target_bandwidth
from tuning.hardware.interference import Interference
from tuning.hardware.peak import target_peak_gflops
from tuning.hardware.roofline import Bandwidth, is_quiet


@dataclass(frozen=True)
class Figures:
    """The peak (GFLOPS) and bandwidth a CPU target reached here, and the share of the cores'
    time other processes took while each was measured (None: not known)."""

    peak_gflops: float
    peak_interference: float | None
    bandwidth: Bandwidth
    bandwidth_interference: float | None

    @property
    def quiet(self) -> bool:
        """Whether both were measured on a quiet machine (`is_quiet`)."""
        return is_quiet(self.peak_interference) and is_quiet(self.bandwidth_interference)


def measure_figures(canonical: dict[str, Any]) -> Figures | None:
    """Measure an llvm target's peak and bandwidth on this machine (a few seconds; the
    caller's TVM pool must have the target's threads); None for other kinds."""
    with Interference() as peak_load:
        peak = target_peak_gflops(canonical)
    with Interference() as bandwidth_load:
        bandwidth = target_bandwidth(canonical)
    if peak is None or bandwidth is None:
        return None
    return Figures(peak, peak_load.share, bandwidth, bandwidth_load.share)
