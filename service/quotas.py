"""Per-identity quotas: the write rate limit (token buckets, in this process) and the cap on an
identity's queued + running jobs. Both answer 429 with ``Retry-After``.

The buckets live in the API process: with several API processes each grants its own burst (the
job cap, counted in the store, holds across them).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from service.refusals import Refusal

MAX_BUCKETS = 10_000  # full buckets are forgotten past this many keys
ACTIVE_JOBS_RETRY_S = 30  # what a client at its job cap is told to wait


def too_many(msg: str, kind: str, retry_after_s: float) -> Refusal:
    """A 429 with ``Retry-After`` (whole seconds, at least 1), also in the body."""
    seconds = max(1, math.ceil(retry_after_s))
    return Refusal(429, msg, kind, {"Retry-After": str(seconds)}, retry_after_s=seconds)


class WriteLimiter:
    """One token bucket per key: ``burst`` requests at once, then ``rate_per_s`` a second.
    A rate of 0 lets everything through. Thread-safe."""

    def __init__(
        self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate_per_s
        self.burst = max(1, burst)
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: str) -> float:
        """Spend one token of ``key``'s bucket: 0.0 when granted, else the seconds until one
        is available (nothing is spent then)."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                return (1.0 - tokens) / self.rate
            if len(self._buckets) >= MAX_BUCKETS and key not in self._buckets:
                self._forget_full(now)
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0

    def check(self, key: str) -> None:
        """`take`, raising the 429 when the bucket is empty."""
        wait = self.take(key)
        if wait > 0:
            raise too_many(
                f"write rate limit: {self.rate:g} requests/s (bursts of {self.burst}) per "
                f"identity; retry in {wait:.1f} s",
                "rate_limited",
                wait,
            )

    def _forget_full(self, now: float) -> None:
        full_after = self.burst / self.rate
        self._buckets = {
            k: (t, at) for k, (t, at) in self._buckets.items() if now - at < full_after
        }


def check_active_jobs(active: int, limit: int) -> None:
    """The 429 of an identity that already has ``active`` queued or running jobs, when that
    reaches ``limit`` (0: no cap)."""
    if limit > 0 and active >= limit:
        raise too_many(
            f"{active} of your jobs are queued or running; at most {limit} may be "
            f"(wait for some to finish or cancel some)",
            "too_many_jobs",
            ACTIVE_JOBS_RETRY_S,
        )
