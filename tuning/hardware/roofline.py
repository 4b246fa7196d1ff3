"""The roofline of a kernel: the least time any kernel computing ``flop`` FLOP and moving
``nbytes`` bytes can take on a target, from the target's measured fp32 peak
(`tuning.hardware.peak`) and bandwidth (`tuning.hardware.bandwidth`). Pure Python: the API shows
it beside each schedule, the worker stops a search that reached it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

AT_ROOFLINE = 0.85
"""A kernel at this share of its roofline or more is at the roofline: its search stops early
(the issue's bar for compute-bound layers; what a hand-written BLAS reaches)."""


@dataclass(frozen=True)
class Bandwidth:
    """GB/s (1e9 bytes per second) that a streaming kernel reaches at each level a task's bytes
    may live in: the cores' own caches (up to ``cache_bytes`` over all threads), the shared
    last-level cache (up to ``llc_bytes``; None where the machine has no such level or it was not
    measured) and memory."""

    cache_gbps: float
    memory_gbps: float
    cache_bytes: int
    llc_gbps: float | None = None
    llc_bytes: int | None = None

    def for_bytes(self, nbytes: float) -> float:
        """The bandwidth a task moving ``nbytes`` can reach: that of the smallest level they
        fit in (a model's activations and weights of a few MB stay in the last-level cache
        between the layers that write and read them, as they do between timed runs)."""
        if nbytes <= self.cache_bytes:
            return self.cache_gbps
        if self.llc_gbps and self.llc_bytes and nbytes <= self.llc_bytes:
            return self.llc_gbps
        return self.memory_gbps

    @classmethod
    def of(cls, target: MeasuredTarget, trusted: bool = False) -> Bandwidth | None:
        """The bandwidth a worker of ``target`` measured, or None while none did (with
        ``trusted``: none on a quiet machine)."""
        if trusted and not target.bandwidth_trusted:
            return None
        if target.cache_gbps and target.memory_gbps and target.cache_bytes:
            return cls(target.cache_gbps, target.memory_gbps, target.cache_bytes,
                       target.llc_gbps or None, target.llc_bytes or None)  # fmt: skip
        return None


class MeasuredTarget(Protocol):
    """What a target's workers measured (the store's target rows have these fields)."""

    @property
    def peak_gflops(self) -> float | None: ...
    @property
    def cache_gbps(self) -> float | None: ...
    @property
    def memory_gbps(self) -> float | None: ...
    @property
    def cache_bytes(self) -> int | None: ...
    @property
    def llc_gbps(self) -> float | None: ...
    @property
    def llc_bytes(self) -> int | None: ...
    @property
    def bf16_peak_gflops(self) -> float | None: ...
    @property
    def peak_trusted(self) -> bool:
        """Whether the peak was measured on a quiet machine (`tuning.hardware.interference`)."""

    @property
    def bf16_peak_trusted(self) -> bool:
        """Whether the bf16 peak was."""

    @property
    def bandwidth_trusted(self) -> bool:
        """Whether the bandwidth was."""


def trusted_peak(target: MeasuredTarget, bf16: bool = False) -> float | None:
    """The target's measured peak if it was measured on a quiet machine, else None: nothing
    is derived from a peak measured under load. ``bf16``: the peak of its bf16 unit (a bf16
    kernel's ceiling: `tuning.hardware.peak_bf16`), never the fp32 one."""
    if bf16:
        return target.bf16_peak_gflops if target.bf16_peak_trusted else None
    return target.peak_gflops if target.peak_trusted else None


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


def roofline_us(
    flop: float, nbytes: float | None, target: MeasuredTarget, bf16: bool = False
) -> float | None:
    """`roofline_seconds` in microseconds, from the figures ``target``'s workers measured on a
    quiet machine: one measured under load counts as not measured (a roofline from it would
    be too long: a search would stop short of it, a kernel show closer than it is). ``bf16``:
    a workload on bf16 operands, whose compute ceiling is the bf16 unit's peak (none measured:
    no roofline, rather than the fp32 peak's, which its kernels pass)."""
    trusted = Bandwidth.of(target, trusted=True)
    peak = trusted_peak(target, bf16)
    if bf16 and peak is None:
        return None
    secs = roofline_seconds(flop, nbytes, peak, trusted)
    return None if secs is None else secs * 1e6


def at_roofline(latency_us: float | None, roofline: float | None) -> bool:
    """Whether a kernel of ``latency_us`` is at the roofline (`AT_ROOFLINE` of it or closer;
    False while either is unknown)."""
    return latency_us is not None and roofline is not None and latency_us * AT_ROOFLINE <= roofline


def share_of_roofline(latency_s: float, roofline_s: float | None) -> float | None:
    """How close a kernel of ``latency_s`` comes to its roofline, in (0, 1]: a kernel faster
    than the roofline shows the figures were measured low, and counts as at it (1)."""
    if roofline_s is None or latency_s <= 0:
        return None
    return min(1.0, roofline_s / latency_s)
