"""The roofline of a kernel: the least time any kernel computing ``flop`` FLOP and moving
``nbytes`` bytes can take on a target, from the target's measured fp32 peak
(`tuning.hardware.peak`) and bandwidth (`tuning.hardware.bandwidth`). Pure Python: the API shows
it beside each schedule, the worker stops a search that reached it.
"""

from __future__ import annotations

from dataclasses import dataclass

AT_ROOFLINE = 0.85
"""A kernel at this share of its roofline or more is at the roofline: its search stops early
(the issue's bar for compute-bound layers; what a hand-written BLAS reaches)."""


@dataclass(frozen=True)
class Bandwidth:
    """GB/s (1e9 bytes per second) that a streaming kernel reaches in cache and in memory, and
    the most bytes (over all threads) that still count as cache-resident."""

    cache_gbps: float
    memory_gbps: float
    cache_bytes: int

    def for_bytes(self, nbytes: float) -> float:
        """The bandwidth a task moving ``nbytes`` can reach: the cache's while they fit."""
        return self.cache_gbps if nbytes <= self.cache_bytes else self.memory_gbps


def roofline_seconds(
    flop: float, nbytes: float | None, peak_gflops: float | None, bandwidth: Bandwidth | None
) -> float | None:
    """The least time a kernel of ``flop`` FLOP moving ``nbytes`` bytes can take on a target of
    this peak and bandwidth: the larger of its compute time and its memory time, of those that
    are known; None when neither is."""
    times = []
    if peak_gflops and flop > 0:
        times.append(flop / (peak_gflops * 1e9))
    if bandwidth is not None and nbytes:
        times.append(nbytes / (bandwidth.for_bytes(nbytes) * 1e9))
    return max(times) if times else None


def share_of_roofline(latency_s: float, roofline_s: float | None) -> float | None:
    """How close a kernel of ``latency_s`` comes to its roofline, in (0, 1]: a kernel faster
    than the roofline shows the figures were measured low, and counts as at it (1)."""
    if roofline_s is None or latency_s <= 0:
        return None
    return min(1.0, roofline_s / latency_s)
