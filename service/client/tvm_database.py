"""`TunehubDatabase`: a MetaSchedule `Database` a TVM build reads tuned schedules from.

It answers MetaSchedule's queries (``compile_tir``, ``compile_relax``,
``MetaScheduleApplyDatabase``) from a tunehub server through `RestScheduleReader`, bound to ONE
target and to the installed TVM series: MetaSchedule's own lookups ignore the target
(apache/tvm#15549), so a database bound to one target never hands a schedule tuned for another.
`prefetch` asks for every PrimFunc of a module in one request; a workload not prefetched is
looked up on first use (one request each), and a miss is remembered. Every answer is also kept
on disk (`service.client.lookup_cache`): when the server does not answer, the database answers
from there and warns (`OfflineWarning`). Read-only unless ``commit=True``: then the records a
tuning build commits are kept and `push` sends them as an import (verified before served).

A best whose plain, unscheduled function was the fastest verified candidate has no record: the
database then answers nothing for it and the build uses the function as written, which is what
tunehub verified.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import httpx
import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.database import PyDatabase, TuningRecord, Workload

from schedule_reads import TunedSchedule, tvm_series
from service.client.errors import Offline, OfflineWarning, TunehubError, TuneMissingWarning
from service.client.http import TunehubClient
from service.client.lookup_cache import CachedLookups, LookupCache
from service.client.reader import RestScheduleReader
from tuning.checks.trace_gate import UnsafeTrace, check_trace_text
from tuning.hardware.bf16 import reads_packed_bf16, register_named_intrinsics, request_amx
from tuning.models.pipeline import tuning_pipeline

MAX_TASKS_PER_UPLOAD = 64  # the service's cap on one POST /tasks


@derived_object
class TunehubDatabase(PyDatabase):
    """MetaSchedule database over a tunehub server, bound to ``target`` (a `tvm.target.Target`,
    its JSON dict, "host" = the server's host, or a stored target's key or label)."""

    def __init__(
        self,
        client: TunehubClient,
        target: Any,
        *,
        commit: bool = False,
        cache: bool = True,
        allow_neighbour: bool = False,
        tune_missing: bool = False,
        layout: str = "plain",
        precision: str = "float32",
    ) -> None:
        """``commit``: keep the records MetaSchedule commits (a build that tunes) and send them
        with `push`. ``cache``: save every answer on disk (`LookupCache`) and, when the server
        does not answer, answer from there, with an `OfflineWarning` saying so.
        ``allow_neighbour``: take the service's instant answer for an untuned workload (its
        nearest tuned neighbour's schedule, refitted and checked to compile, not verified on
        this workload yet; a job then verifies and tunes it); an answer the service later
        withdraws is dropped from the cache on the next lookup. ``layout``: the pipeline's
        layout for a Relax module `prefetch` fuses itself (`tuning.models.blocked_layout`);
        ``precision``: its precision (`tuning.models.precision`)."""
        super().__init__()
        self.layout, self.precision = layout, precision
        spec = _plain(target.export()) if isinstance(target, tvm.target.Target) else target
        self.client = client
        self.reader = RestScheduleReader(client, tvm_series(tvm.__version__), allow_neighbour)
        self.target = tvm.target.Target(spec) if isinstance(spec, dict) else None
        self.target_spec = spec
        self.commit = commit
        self.tune_missing = tune_missing
        self.sent: dict[str, dict[str, Any]] = {}  # hash -> the service's state of a sent task
        self.cache = LookupCache(client.base_url, spec) if cache else None
        self.offline_since: str | None = None  # when the answers in use were fetched, offline
        self._answers: dict[str, TunedSchedule | None] = {}  # hash -> best (None: untuned)
        self._workloads: dict[str, Workload] = {}
        self._pending: list[tuple[str, TuningRecord]] = []  # committed, not pushed yet
        try:
            self.target_key = self.reader.target_key(spec)
        except httpx.TransportError as err:
            self.target_key = self._go_offline(err).target_key

    def _go_offline(self, err: Exception) -> CachedLookups:
        """Answer from the cache from now on (warning once); raise `Offline` without one."""
        cached = self.cache.load() if self.cache is not None else None
        if cached is None or cached.tvm_series != self.reader.tvm_series:
            raise Offline(f"tunehub at {self.client.base_url} does not answer ({err}) and "
                          "nothing is cached for this target") from err  # fmt: skip
        if self.offline_since is None:
            warnings.warn(
                f"offline: tunehub at {self.client.base_url} does not answer ({err}); answering "
                f"from the cache of {cached.fetched_at} ({len(cached.answers)} workloads)",
                OfflineWarning,
                stacklevel=3,
            )
        self.offline_since = cached.fetched_at
        return cached

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
            mod = tuning_pipeline(mod, self.target, layout=self.layout,
                                  precision=self.precision)  # fmt: skip
        tasks = {
            _shash(module): (str(gvar.name_hint), module)
            for gvar, func in mod.functions.items()
            if isinstance(func, tvm.tirx.PrimFunc)
            for module in [_as_workload_module(func)]
        }
        self._fetch(list(tasks))
        if self.tune_missing and self.offline_since is None:
            self._send_missing(tasks)
        return sum(1 for h in tasks if _applies(self._answers.get(h)))

    def _send_missing(self, tasks: dict[str, tuple[str, Any]]) -> None:
        """Send the tasks without an answer (not sent before) to be tuned, then look them up
        again: a neighbour answer may now exist for them. ``sent`` keeps the service's state
        of each; a task the service hashes differently than this build is warned about (its
        lookups would miss for ever)."""
        missing = [h for h in tasks if self._answers.get(h) is None and h not in self.sent]
        for start in range(0, len(missing), MAX_TASKS_PER_UPLOAD):
            batch = missing[start : start + MAX_TASKS_PER_UPLOAD]
            sent = [(tasks[h][0], tvm.ir.save_json(tasks[h][1])) for h in batch]
            try:
                answer = self.client.upload_tasks(self.target_spec, sent)
            except (TunehubError, httpx.TransportError) as err:
                self._upload_failed(err, len(missing) - start)
                missing = missing[:start]
                break
            for shash, state in zip(batch, answer["tasks"], strict=True):
                self.sent[shash] = state
                if state["workload"] != shash:
                    warnings.warn(
                        f"task {state['name']}: the service hashes it as {state['workload']}, "
                        f"this build as {shash}: its schedules cannot be found by this build",
                        stacklevel=3,
                    )
        if missing:
            for shash in missing:
                del self._answers[shash]
            self._fetch(missing)

    def _upload_failed(self, err: Exception, unsent: int) -> None:
        """A refused or unanswered upload: warn once with the service's reason and send nothing
        more from this database; the build goes on with the answers it has."""
        self.tune_missing = False
        reason = err.describe() if isinstance(err, TunehubError) else f"no answer ({err})"
        warnings.warn(
            f"tune_missing: {unsent} task(s) not sent to {self.client.base_url}: {reason}; "
            "building with what the service has",
            TuneMissingWarning,
            stacklevel=4,
        )

    def _fetch(self, hashes: list[str]) -> None:
        wanted = [h for h in dict.fromkeys(hashes) if h not in self._answers]
        if not wanted:
            return
        if self.offline_since is None:
            try:
                found = self.reader.lookup(self.target_key, wanted)
            except httpx.TransportError as err:
                self._go_offline(err)
            else:
                answers = {shash: found.get(shash) for shash in wanted}
                # Withdrawn neighbour answers leave the cache, whoever asked for them.
                answers.update(dict.fromkeys(self.reader.withdrawn - set(answers)))
                self._answers.update(answers)
                if self.cache is not None:
                    self.cache.save(self.target_key, self.reader.tvm_series, answers)
                return
        cached = self._go_offline(RuntimeError("offline"))
        for shash in wanted:
            best = cached.answers.get(shash)
            usable = best is not None and (best.verified or self.reader.allow_neighbour)
            self._answers[shash] = best if usable else None

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
        """Kept for `push` with ``commit=True``; otherwise a build's measurements stay with it."""
        if self.commit:
            shash = _shash(record.workload.mod)
            self._workloads.setdefault(shash, record.workload)
            self._pending.append((shash, record))

    def push(self) -> dict[str, Any] | None:
        """Send the records committed since the last push to the service (``POST /import``,
        needs the ``submit-code`` scope), as a MetaSchedule JSON database measured on this target:
        they are validated as any import, stored unverified, and served only once a worker of
        the target has verified them (one verification job per workload is queued). Returns
        the import's summary; None when nothing is pending."""
        if not self._pending:
            return None
        index: dict[str, int] = {}
        workloads: list[str] = []
        records: list[str] = []
        for shash, record in self._pending:
            if shash not in index:
                index[shash] = len(workloads)
                workloads.append(json.dumps(self._workloads[shash].as_json()))
            records.append(json.dumps([index[shash], record.as_json()]))
        body = {
            "target": self.target_spec,
            "database_workload.json": "\n".join(workloads) + "\n",
            "database_tuning_record.json": "\n".join(records) + "\n",
        }
        summary = self.client._object(self.client.http.post("/import", json=body, timeout=600))
        self._pending.clear()
        return summary

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        best = self._best(workload.mod)
        if top_k <= 0 or best is None or best.record is None:
            return []
        record = best.record
        target = self.target.export() if self.target is not None else None
        try:  # what the service answers is replayed in this process: it passes the gate first
            trace = check_trace_text(record.trace_json)
        except UnsafeTrace as err:
            warnings.warn(f"schedule {best.schedule_id} is not applied: {err}", stacklevel=2)
            return []
        register_named_intrinsics(record.trace_json)  # tunehub's own intrinsics it names
        if reads_packed_bf16(record.trace_json):
            request_amx()  # what this process compiles may run here on AMX tiles
        raw = [trace, record.run_secs, target, record.args_info]
        return [TuningRecord.from_json(raw, workload)]

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
