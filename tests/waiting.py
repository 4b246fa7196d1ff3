"""Waiting on an event instead of sleeping for a fixed time: a test polls the condition it is
about to rely on, with a deadline, so it passes as soon as the event happened and still passes
on a busy machine where it happens late."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    condition: Callable[[], T],
    timeout_s: float = 30.0,
    poll_s: float = 0.02,
    what: str | Callable[[], str] = "",
) -> T:
    """Call ``condition`` until it returns something truthy, and return that. Past
    ``timeout_s`` it is called once more, then an AssertionError names ``what`` (a string, or
    a callable giving one: a log's tail)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    value = condition()
    if value:
        return value
    said = what() if callable(what) else what
    raise AssertionError(f"not so within {timeout_s} s: {said or condition}")
