"""`ScheduleReader`: the read side a TVM build needs, whatever stores the schedules."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from schedule_reads.values import ScheduleKey, TunedRecord, TunedSchedule


class ScheduleReader(ABC):
    """Verified best schedules and top records, read for one TVM series.

    An abstract base class rather than a `typing.Protocol`: its implementations (SQL on the server,
    HTTP in the light client) are ours and subclass it on purpose, so a
    missing method fails when the reader is constructed, not in the middle of a build; and the base
    holds what every implementation shares (the bound series and its check of a key).

    Contract of every implementation:

    * **One TVM series.** A reader is bound to one series (`tvm_series`, e.g. "0.27"): it never
      returns a record or schedule of another (a trace replays only within its series).
    * **One target.** Every answer is for exactly the target key asked; nothing measured on
      another target is ever returned, however similar (apache/tvm#15549: a database answering
      across targets applies a schedule tuned for different hardware).
    * **Only what was verified.** Failed candidates and imported records no worker has verified
      are never returned; a schedule is a best verified against the reference — except a
      neighbour answer (``verified`` False), returned only by a reader made to ask for them.
    * **A miss is not an error.** An unknown workload, target or key is None (`best`), an empty
      list (`top_k`) or an absent dict key (`lookup`).
    * **Workload identity.** A workload is named by its structural hash. Where the store holds
      one hash twice (a catalog workload and a user's function), the catalog's answers when it
      has an answer.
    * Answers are committed data, consistent per call; they may be stale by the time they are
      used (a faster best may be published meanwhile).
    """

    def __init__(self, tvm_series: str) -> None:
        if not tvm_series:
            raise ValueError("a ScheduleReader is bound to one TVM series (e.g. '0.27')")
        self.tvm_series = tvm_series

    def check_key(self, key: ScheduleKey) -> None:
        """ValueError unless ``key`` is of this reader's series: asking for another series
        is the caller's error, never answered."""
        if key.tvm_series != self.tvm_series:
            raise ValueError(
                f"key of TVM series {key.tvm_series!r} asked of a reader of {self.tvm_series!r}"
            )

    def best(self, key: ScheduleKey) -> TunedSchedule | None:
        """The verified best of ``key`` (of this reader's series: ValueError otherwise,
        `check_key`), or None if there is none: a `lookup` of one workload."""
        self.check_key(key)
        return self.lookup(key.target_key, [key.workload_shash]).get(key.workload_shash)

    @abstractmethod
    def top_k(self, workload_shash: str, target_key: str, k: int) -> list[TunedRecord]:
        """The ``k`` fastest successful, verified records of one workload on one target (this
        series), fastest first (ties: oldest first); fewer when fewer exist, [] on a miss."""

    @abstractmethod
    def lookup(self, target_key: str, workload_shashes: Sequence[str]) -> dict[str, TunedSchedule]:
        """The verified bests of many workloads on one target (this series), in one round
        trip (a whole model's tasks): hash -> best, for the hashes that have one (a miss is
        absent; duplicates are answered once)."""
