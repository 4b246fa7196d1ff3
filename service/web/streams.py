"""The event streams one API process holds open (`StreamSlots`): each holds a connection and
polls the store every half second for as long as its job runs, so one identity may hold at
most ``per_identity`` of them and the process at most ``total``; past either, a 429
``too_many_streams`` with ``Retry-After`` before the stream starts. Per process on purpose:
what a stream costs is this process's connections and polls, and replicas add their own."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from service.web.quotas import too_many

RETRY_STREAM_S = 5


class StreamSlots:
    """Open streams by identity (their limit key); thread-safe. A cap of 0 is no cap."""

    def __init__(self, per_identity: int, total: int) -> None:
        self.per_identity = per_identity
        self.total = total
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, key: str) -> Callable[[], None]:
        """Hold one stream for ``key``: its release (safe to call more than once), or the 429
        when ``key`` or the process holds its cap already."""
        with self._lock:
            if self.per_identity and self._open[key] >= self.per_identity:
                raise too_many(
                    f"this identity holds {self._open[key]} open event streams, the most one "
                    "may; close one",
                    "too_many_streams",
                    RETRY_STREAM_S,
                )
            if self.total and sum(self._open.values()) >= self.total:
                raise too_many(
                    f"this server holds {self.total} open event streams, the most it serves; retry",
                    "too_many_streams",
                    RETRY_STREAM_S,
                )
            self._open[key] += 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if not released.is_set():
                    released.set()
                    self._open[key] -= 1
                    if self._open[key] <= 0:
                        del self._open[key]

        return release

    def held(self, key: str | None = None) -> int:
        """Streams open for ``key`` (all of them when None)."""
        with self._lock:
            return sum(self._open.values()) if key is None else self._open[key]
