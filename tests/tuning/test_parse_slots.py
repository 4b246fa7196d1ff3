"""Issue 37, item 2: a request that finds every isolated parser busy waits for one, first come
first served, for the process's ``wait_s`` (`set_max_concurrent`), instead of a 429 at once;
at most `MAX_WAITING` wait, and with no wait set the 429 comes at once as before. Slots only:
no child is started here."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.waiting import eventually
from tuning.jail import SandboxBusy, holding_slot, set_max_concurrent, slots_busy
from tuning.jail.isolated import MAX_WAITING, _slots


@pytest.fixture(autouse=True)
def one_slot() -> Iterator[None]:
    set_max_concurrent(1, wait_s=30)
    try:
        yield
    finally:
        set_max_concurrent(2)


class Holder(threading.Thread):
    """Takes a slot (waiting as the process says) and holds it until `release` is set."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name=name, daemon=True)
        self.log, self.release, self.holding = log, threading.Event(), threading.Event()
        self.busy: SandboxBusy | None = None

    def run(self) -> None:
        try:
            with holding_slot():
                self.log.append(self.name)
                self.holding.set()
                self.release.wait(30)
        except SandboxBusy as err:
            self.busy = err


def _waiting(count: int) -> None:
    eventually(lambda: len(_slots.queue) == count, 10, what=f"{count} requests waiting")


def test_waiting_requests_get_the_slot_in_the_order_they_came() -> None:
    log: list[str] = []
    first = Holder("first", log)
    first.start()
    assert first.holding.wait(10)
    waiting: list[Holder] = []
    for name in ("second", "third"):  # each one queued before the next starts
        holder = Holder(name, log)
        holder.start()
        _waiting(len(waiting) + 1)
        waiting.append(holder)
    assert slots_busy() == 1 and log == ["first"]
    first.release.set()
    assert waiting[0].holding.wait(10)
    assert log == ["first", "second"]  # the third still waits for the one slot
    waiting[0].release.set()
    assert waiting[1].holding.wait(10)
    waiting[1].release.set()
    for holder in (first, *waiting):
        holder.join(10)
        assert holder.busy is None
    assert log == ["first", "second", "third"] and slots_busy() == 0


def test_a_request_waits_no_longer_than_the_process_says() -> None:
    set_max_concurrent(1, wait_s=0.3)
    holder = Holder("holder", [])
    holder.start()
    assert holder.holding.wait(10)
    started = time.monotonic()
    with pytest.raises(SandboxBusy), holding_slot():
        pass
    assert time.monotonic() - started >= 0.3
    assert not _slots.queue  # it left the line
    holder.release.set()
    holder.join(10)
    with holding_slot():  # and the slot is free again
        assert slots_busy() == 1


def test_without_a_wait_or_past_the_line_a_request_is_refused_at_once() -> None:
    log: list[str] = []
    holder = Holder("holder", log)
    holder.start()
    assert holder.holding.wait(10)
    waiters = [Holder(f"waiter{i}", log) for i in range(MAX_WAITING)]
    for waiter in waiters:
        waiter.start()
    _waiting(MAX_WAITING)
    started = time.monotonic()
    with pytest.raises(SandboxBusy), holding_slot():  # the line is full
        pass
    set_max_concurrent(1, wait_s=0)
    with pytest.raises(SandboxBusy), holding_slot():  # no wait at all
        pass
    assert time.monotonic() - started < 2
    set_max_concurrent(MAX_WAITING + 1, wait_s=30)  # room for every waiter: none is lost
    for waiter in waiters:
        assert waiter.holding.wait(10)
        waiter.release.set()
    holder.release.set()
    for thread in (holder, *waiters):
        thread.join(10)
        assert thread.busy is None
    assert len(log) == MAX_WAITING + 1
