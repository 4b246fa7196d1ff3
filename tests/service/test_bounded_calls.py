"""`service.web.bounded_calls`: the caller waits until the deadline only, and a call that has not
ended is never joined by another of its name (what keeps ``/metrics`` probes from piling up)."""

from __future__ import annotations

import threading
import time

from service.web.bounded_calls import BoundedCalls


def test_a_hung_call_is_abandoned_at_the_deadline_and_never_doubled() -> None:
    calls = BoundedCalls()
    release = threading.Event()
    started: list[str] = []

    def hangs() -> bool:
        started.append("hangs")
        return release.wait(30)

    def fails() -> bool:
        raise RuntimeError("refused")

    try:
        began = time.monotonic()
        first = calls.run({"hangs": hangs, "quick": lambda: True, "fails": fails}, 0.3)
        assert time.monotonic() - began < 2
        assert first["hangs"].late and not first["hangs"].answered
        assert first["hangs"].seconds == 0.3
        assert first["quick"].answered and first["quick"].value is True
        assert isinstance(first["fails"].error, RuntimeError)
        assert "RuntimeError: refused" in first["fails"].why()

        second = calls.run({"hangs": hangs, "quick": lambda: True}, 0.3)
        assert second["hangs"].busy and not second["hangs"].answered
        assert second["hangs"].seconds >= 0.3  # how long the first has run
        assert second["quick"].answered
        assert started == ["hangs"] and calls.in_flight() == {"hangs"}
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while calls.in_flight():  # the abandoned call ends when its own wait does
        assert time.monotonic() < deadline
        time.sleep(0.01)
    third = calls.run({"hangs": hangs}, 5)
    assert third["hangs"].answered and third["hangs"].value is True
    assert started == ["hangs", "hangs"]
