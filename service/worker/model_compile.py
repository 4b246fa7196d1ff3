"""Compiling a whole model once its tasks are tuned: claim, compile in isolation, publish.

A worker claims the compile of a ready model on its targets (`Models.claim_compile`), reads the
verified best of every task on the model's target, and hands the uploaded file and those
records to an isolated child (`tuning.untrusted.user_model.compile_model`: the model is user
input, parsed and run only in the jail), which builds it untuned and tuned with the same
pipeline the tasks were extracted with, checks both agree on the same inputs, times both and
exports the tuned Relax VM library. The worker then stores the library in the artifact
store (whole or not at all) and marks the model succeeded with the figures in one
transaction. While it compiles, a thread heart-beats the model; a worker killed mid-compile
leaves a stale heartbeat and another worker (woken by the reaper) compiles it again from the
start; so does a compile that found every isolated slot busy (it stops heart-beating and
lapses).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from schedules_db.blobs import BlobStore
from schedules_db.store import Store
from schedules_db.values import ModelJob, PublishedModel
from service.worker.model_budget import spend_reserve
from tuning.jail import SandboxBusy
from tuning.models.inputs import ModelInput
from tuning.untrusted.user_model import compile_model

log = logging.getLogger("tunehub.worker")


def compile_ready_models(
    store: Store,
    target_ids: list[int],
    worker: str,
    blobs: BlobStore,
    stale_after: timedelta,
    heartbeat_every_s: float,
) -> list[str]:
    """Compile every model on ``target_ids`` that is ready and that this worker wins the claim
    of; the final state of each (or "lost", or "busy": no free isolated slot, retried once
    its claim lapses, or "continued": its reserve went to its tasks, which tune again)."""
    outcomes = []
    for model in store.models.ready(target_ids, stale_after):
        if store.models.claim_compile(model.id, worker, stale_after):
            # A reserve is spent before the compile (`model_budget`): tuning goes on, unless
            # every task's new budget was covered already (the compile is claimed again).
            continued = model.reserve_trials > 0 and spend_reserve(store, model, worker)
            if continued and not store.models.claim_compile(model.id, worker, stale_after):
                outcomes.append("continued")
                continue
            outcomes.append(compile_one(store, model.id, worker, blobs, heartbeat_every_s))
    return outcomes


def compile_one(
    store: Store, model_id: int, worker: str, blobs: BlobStore, heartbeat_every_s: float
) -> str:
    """Compile a model this worker has claimed; its final state ("lost" when another worker
    took the compile over)."""
    model = store.models.get(model_id)
    assert model is not None, "a claimed model is never deleted"
    work_dir = Path(tempfile.mkdtemp(prefix=f"tunehub-model{model_id}-"))
    try:
        with _beating(store, model_id, worker, heartbeat_every_s) as lost:
            compiled = _compile(store, model, blobs, work_dir)
            if lost.is_set():
                return "lost"
            if _cancel_requested(store, model_id):
                store.models.cancel_compiling(model_id, worker)
                return "cancelled"
            stored = blobs.put(compiled.path, ".so")
            published = PublishedModel(
                artifact_sha256=stored.sha256,
                artifact_size=stored.size,
                artifact_path=stored.path,
                tasks_applied=compiled.applied,
                untuned_ms=compiled.untuned_ms,
                tuned_ms=compiled.tuned_ms,
                max_abs_error=compiled.max_abs_error,
                min_cosine=compiled.min_cosine,
            )
            if not store.models.finish(model_id, worker, published):
                return "lost"
        log.info(
            "model %s: compiled, %d/%d tasks tuned, %.3f ms (untuned %.3f ms)",
            model_id, compiled.applied, compiled.tasks, compiled.tuned_ms, compiled.untuned_ms,
        )  # fmt: skip
        return "succeeded"
    except SandboxBusy:  # every isolated slot taken: not the model's fault, compile it later
        log.warning("model %s: no free isolated slot; compiled again once its claim lapses",
                    model_id)  # fmt: skip
        return "busy"
    except Exception as err:
        log.exception("model %s: compile failed", model_id)
        store.models.fail(model_id, worker, f"{type(err).__name__}: {err}")
        return "failed"
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _cancel_requested(store: Store, model_id: int) -> bool:
    model = store.models.get(model_id)
    return model is not None and model.cancel_requested


def _compile(store: Store, model: ModelJob, blobs: BlobStore, work_dir: Path) -> Any:
    """The model compiled in isolation with its tasks' verified bests on its target."""
    target = store.catalog.get_target(model.target_id)
    source_row = store.schedules.get_artifact(model.source_artifact_id)
    if target is None or source_row is None:
        raise LookupError(f"model {model.id}: its target or uploaded file is gone")
    source = blobs.read_to(source_row, work_dir / "uploaded-model").read_bytes()  # verified
    records = []
    for task in store.models.tasks(model.id):
        best = store.schedules.best(task.task.workload_id, model.target_id)
        if best is None or best.record_id is None:
            continue  # untuned, or the plain function won: built as written
        record = store.records.get(best.record_id)
        workload = store.catalog.get_workload(task.task.workload_id)
        if record is None or workload is None:
            continue
        records.append(
            {
                "shash": workload.shash,
                "trace_json": record.trace_json,
                "run_secs": record.run_secs,
                "args_info": record.args_info,
            }
        )
    inputs = [ModelInput(i["name"], tuple(i["shape"]), i["dtype"]) for i in model.inputs]
    out_dir = work_dir / "out"
    out_dir.mkdir()
    return compile_model(model.format, source, inputs, json.loads(target.canonical_json),
                         records, out_dir, layout=model.layout,
                         precision=model.precision)  # fmt: skip


@contextmanager
def _beating(store: Store, model_id: int, worker: str, every_s: float) -> Iterator[threading.Event]:
    """Heart-beat the model's compile every ``every_s`` while the block runs; the event is set
    once a beat finds that this worker no longer owns it."""
    lost, stop = threading.Event(), threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                if not store.models.heartbeat(model_id, worker):
                    lost.set()
                    return
            except Exception:  # a database blip: the next beat retries
                log.warning("model %s: heartbeat failed; retrying", model_id, exc_info=True)

    thread = threading.Thread(target=beat, name=f"tunehub-model{model_id}-beat", daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join()
