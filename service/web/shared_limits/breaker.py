"""A circuit breaker in front of a dependency that may hang (Redis behind a partition, or
overloaded): the first calls that fail or time out open it, and while it is open every call
fails at once, without touching the dependency, until ``open_s`` have passed; then one call
is let through to probe it (half-open), which closes the breaker on success and opens it again
on failure. Thread-safe: the API's worker threads share one breaker per dependency."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Failure = type[BaseException] | tuple[type[BaseException], ...]  # what counts as failing


class CircuitOpen(Exception):
    """The breaker is open: the dependency failed ``since_s`` seconds ago (``reason``)."""

    def __init__(self, reason: str, since_s: float) -> None:
        super().__init__(f"{reason}, {since_s:.1f} s ago")
        self.reason = reason
        self.since_s = since_s


class Breaker:
    """See the module docstring. ``failures`` consecutive failures open it."""

    def __init__(
        self,
        open_s: float = 5.0,
        failures: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.open_s = open_s
        self.failures = failures
        self._clock = clock
        self._lock = threading.Lock()
        self._failed = 0  # consecutive failures
        self._opened_at: float | None = None
        self._reason = ""
        self._probing = False

    @property
    def is_open(self) -> bool:
        """Whether a call now would be refused at once."""
        with self._lock:
            return self._refuses(self._clock())

    def _refuses(self, now: float) -> bool:
        if self._opened_at is None:
            return False
        return self._probing or now - self._opened_at < self.open_s

    @contextmanager
    def guard(
        self, failure: type[BaseException] | tuple[type[BaseException], ...]
    ) -> Iterator[None]:
        """Run the block unless the breaker is open (`CircuitOpen` then); an exception of
        ``failure`` raised inside counts against the dependency and is re-raised."""
        with self._lock:
            now = self._clock()
            if self._refuses(now):
                assert self._opened_at is not None
                raise CircuitOpen(self._reason, now - self._opened_at)
            probe = self._opened_at is not None  # the cool-down passed: this call probes
            self._probing = probe
        try:
            yield
        except failure as err:
            with self._lock:
                self._failed += 1
                self._probing = False
                if probe or self._failed >= self.failures:
                    self._opened_at = self._clock()
                    self._reason = type(err).__name__
            raise
        except BaseException:
            with self._lock:
                self._probing = False
            raise
        with self._lock:
            self._failed = 0
            self._opened_at = None
            self._probing = False
