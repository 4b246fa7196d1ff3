"""Calls that may hang (a dependency's probe, a read of a sick database), run so that their
caller does not: `BoundedCalls.run` starts each in a thread of its own and waits for them
together until a deadline. A call that has not answered by then is abandoned, never killed:
its thread ends when the call does (the calls bound themselves too: timeouts of their own).
So that abandoned calls never pile up, at most one call of each name runs at a time: while
one still runs, another of that name is not started and answers `Outcome.busy`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """How one call went: its ``value`` when it returned in time, how long it took (the
    deadline's seconds when it did not answer in time; when ``busy``, how long the earlier
    call has run), what it raised, whether it ran past the deadline, and whether an earlier
    call of its name still ran (then none was started)."""

    value: T | None
    seconds: float
    error: Exception | None = None
    late: bool = False
    busy: bool = False

    @property
    def answered(self) -> bool:
        """Whether it returned in time."""
        return self.error is None and not self.late and not self.busy

    def why(self) -> str:
        """Why it did not answer, in words ("" when it did)."""
        if self.busy:
            return f"its previous call still runs, for {self.seconds:.1f} s now"
        if self.late:
            return f"no answer within {self.seconds:.1f} s"
        return "" if self.error is None else f"{type(self.error).__name__}: {self.error}"


class BoundedCalls:
    """The calls of one owner (each name's call in flight is shared by all of its `run`s).
    Thread-safe."""

    def __init__(self, thread_prefix: str = "tunehub-call") -> None:
        self.thread_prefix = thread_prefix
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}  # name -> when its call started (monotonic)

    def in_flight(self) -> set[str]:
        """The names whose call runs now."""
        with self._lock:
            return set(self._running)

    def run(self, calls: dict[str, Callable[[], T]], timeout_s: float) -> dict[str, Outcome[T]]:
        """Start every call whose name has none running, wait for them until ``timeout_s``
        after the start, and say how each went."""
        started = time.monotonic()
        results: dict[str, Outcome[T]] = {}
        busy: dict[str, Outcome[T]] = {}
        threads = []
        with self._lock:
            for name, call in calls.items():
                if name in self._running:
                    busy[name] = Outcome(None, started - self._running[name], busy=True)
                    continue
                self._running[name] = started
                threads.append(
                    threading.Thread(
                        target=self._call,
                        args=(name, call, started, results),
                        name=f"{self.thread_prefix}-{name}",
                        daemon=True,
                    )
                )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, started + timeout_s - time.monotonic()))
        with self._lock:  # an answer written after this is not taken
            answered = dict(results)
        return {
            name: busy.get(name) or answered.get(name) or Outcome(None, timeout_s, late=True)
            for name in calls
        }

    def _call(
        self, name: str, call: Callable[[], T], started: float, results: dict[str, Outcome[T]]
    ) -> None:
        try:
            value: T | None = call()
            error: Exception | None = None
        except Exception as err:  # noqa: BLE001 - a call that raises did not answer
            value, error = None, err
        outcome = Outcome(value, time.monotonic() - started, error)
        with self._lock:
            results[name] = outcome
            del self._running[name]
