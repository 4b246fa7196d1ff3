"""`TunehubDatabase`: a MetaSchedule `Database` a TVM build reads tuned schedules from.

It answers MetaSchedule's queries (``compile_tir``, ``compile_relax``,
``MetaScheduleApplyDatabase``) from a tunehub server through `RestScheduleReader`, bound to ONE
target and to the installed TVM series: MetaSchedule's own lookups ignore the target
(apache/tvm#15549), so a database bound to one target never hands a schedule tuned for another.
`prefetch` asks for every PrimFunc of a module in one request; a workload not prefetched is
looked up on first use (one request each), and a miss is remembered. Read-only: records a
build measures are not sent back (`commit_tuning_record` drops them).

A best whose plain, unscheduled function was the fastest verified candidate has no record: the
database then answers nothing for it and the build uses the function as written, which is what
tunehub verified.
"""

from __future__ import annotations

import json
from typing import Any

import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.database import PyDatabase, TuningRecord, Workload

from schedule_reads import TunedSchedule, tvm_series
from service.client.http import TunehubClient
from service.client.reader import RestScheduleReader
from tuning.models.pipeline import tuning_pipeline


@derived_object
class TunehubDatabase(PyDatabase):
    """MetaSchedule database over a tunehub server, bound to ``target`` (a `tvm.target.Target`,
    its JSON dict, "host" = the server's host, or a stored target's key or label)."""

    def __init__(self, client: TunehubClient, target: Any) -> None:
        super().__init__()
        spec = _plain(target.export()) if isinstance(target, tvm.target.Target) else target
        self.reader = RestScheduleReader(client, tvm_series(tvm.__version__))
        self.target_key = self.reader.target_key(spec)
        self.target = tvm.target.Target(spec) if isinstance(spec, dict) else None
        self._answers: dict[str, TunedSchedule | None] = {}  # hash -> best (None: untuned)
        self._workloads: dict[str, Workload] = {}

    # -- what the build asks --------------------------------------------------------------
    def prefetch(self, mod: Any) -> int:
        """Look up every PrimFunc of ``mod`` (each as the module MetaSchedule queries: itself
        as ``main``) in one request; returns how many have a tuned schedule to apply. A Relax module
        without PrimFuncs (not legalized yet) is first put through the pipeline model jobs
        extract tasks with (`tuning.models.pipeline.tuning_pipeline`, which needs this
        database's target as a `tvm.target.Target` or its JSON): its fused PrimFuncs are what a
        build applies. A module that has PrimFuncs is taken as the build's own, fused already."""
        if not any(isinstance(f, tvm.tirx.PrimFunc) for _, f in mod.functions.items()):
            if self.target is None:
                raise ValueError(
                    "prefetch of a Relax module needs the target itself (a tvm.target.Target "
                    "or its JSON), not a key or label: the pipeline runs under it"
                )
            mod = tuning_pipeline(mod, self.target)
        hashes = [
            _shash(_as_workload_module(func))
            for _, func in mod.functions.items()
            if isinstance(func, tvm.tirx.PrimFunc)
        ]
        self._fetch(hashes)
        return sum(1 for h in set(hashes) if _applies(self._answers.get(h)))

    def _fetch(self, hashes: list[str]) -> None:
        wanted = [h for h in dict.fromkeys(hashes) if h not in self._answers]
        if not wanted:
            return
        found = self.reader.lookup(self.target_key, wanted)
        for shash in wanted:
            self._answers[shash] = found.get(shash)

    def _best(self, mod: Any) -> TunedSchedule | None:
        shash = _shash(mod)
        self._fetch([shash])
        return self._answers[shash]

    # -- PyDatabase ----------------------------------------------------------------------
    def has_workload(self, mod: Any) -> bool:
        return _applies(self._best(mod))

    def commit_workload(self, mod: Any) -> Workload:
        shash = _shash(mod)
        if shash not in self._workloads:
            self._workloads[shash] = Workload(mod)
        return self._workloads[shash]

    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Read-only: a build's own measurements stay with the build."""

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        best = self._best(workload.mod)
        if top_k <= 0 or best is None or best.record is None:
            return []
        record = best.record
        target = self.target.export() if self.target is not None else None
        return [
            TuningRecord.from_json(
                [json.loads(record.trace_json), record.run_secs, target, record.args_info],
                workload,
            )
        ]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        return [
            record
            for shash, workload in self._workloads.items()
            for record in self.get_top_k(workload, 1)
            if self._answers.get(shash) is not None
        ]

    def __len__(self) -> int:
        return sum(1 for best in self._answers.values() if _applies(best))


def _applies(best: TunedSchedule | None) -> bool:
    """A verified best with a trace to replay (not the plain function as written)."""
    return best is not None and best.record is not None


def _as_workload_module(func: Any) -> Any:
    """The module MetaSchedule tunes and queries for a PrimFunc: the function as ``main``."""
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def _plain(value: Any) -> Any:
    """A target's exported attributes (FFI maps and arrays inside) as plain JSON values."""
    if isinstance(value, (tvm_ffi.Map, dict)):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tvm_ffi.Array, list, tuple)):
        return [_plain(v) for v in value]
    return value


def _shash(mod: Any) -> str:
    return str(tvm_ffi.structural_hash(mod))
