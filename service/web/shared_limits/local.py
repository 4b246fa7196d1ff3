"""The shared limits kept in this process (no ``TUNEHUB_REDIS_URL``): right for one API process."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from service.web.shared_limits.base import AdmissionLocks, ParseGate, ParseQuota, RateLimiter

MAX_BUCKETS = 10_000  # full buckets are forgotten past this many keys


class LocalParseGate(ParseGate):
    """The identities parsing now, in a set under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsing: dict[str, str] = {}

    def try_enter(self, who: str) -> str | None:
        with self._lock:
            if who in self._parsing:
                return None
            token = self._parsing[who] = uuid.uuid4().hex
            return token

    def leave(self, who: str, token: str) -> None:
        with self._lock:
            if self._parsing.get(who) == token:
                del self._parsing[who]


class LocalAdmissionLocks(AdmissionLocks):
    """One `threading.Lock` per identity (created on first use, dropped when free)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def admitting(self, who: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(who, (threading.Lock(), 0))
            self._locks[who] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[who]
                if users == 1:
                    del self._locks[who]
                else:
                    self._locks[who] = (lock, users - 1)


class WriteLimiter(RateLimiter):
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

    def _forget_full(self, now: float) -> None:
        full_after = self.burst / self.rate
        self._buckets = {
            k: (t, at) for k, (t, at) in self._buckets.items() if now - at < full_after
        }


class LocalParseQuota(ParseQuota):
    """Each identity's balance of parse seconds, in a dict under a lock (see `ParseQuota`)."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._balances: dict[str, tuple[float, float]] = {}  # who -> (seconds, at)

    def _balance(self, who: str, now: float) -> float:
        seconds, at = self._balances.get(who, (self.per_minute, now))
        return min(self.per_minute, seconds + (now - at) * self.per_minute / 60)

    def debt_wait(self, who: str) -> float:
        if self.per_minute <= 0:
            return 0.0
        with self._lock:
            balance = self._balance(who, self._clock())
        return max(0.0, -balance) * 60 / self.per_minute

    def spend(self, who: str, seconds: float) -> None:
        if self.per_minute <= 0:
            return
        now = self._clock()
        with self._lock:
            if len(self._balances) >= MAX_BUCKETS and who not in self._balances:
                self._balances = {  # forget the identities whose balance is full again
                    k: v
                    for k, v in self._balances.items()
                    if self._balance(k, now) < self.per_minute
                }
            self._balances[who] = (self._balance(who, now) - seconds, now)
