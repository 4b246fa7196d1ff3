"""Starting a worker: its targets recorded, itself registered, TVM loaded, its queues consumed."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import uuid
from datetime import timedelta
from typing import Any, NoReturn

from schedules_db import Store, make_engine, upgrade_schema
from service.app.admission import find_named_target, record_target, resolve_named
from service.shared.artifact_files import open_blob_store
from service.shared.artifact_readers import publishing_problem
from service.shared.queue import make_celery, queue_name
from service.shared.settings import Settings
from service.worker.consumer import register_consumer
from service.worker.execution import WorkerContext
from service.worker.figures import FiguresKeeper
from tuning.hardware.host import current_tvm_series, host_fingerprint
from tuning.hardware.intrinsics import load_tensor_intrinsics
from tuning.hardware.threads import pin_runtime_threads, target_threads
from tuning.jail import unavailable_reason
from tuning.measure.devices import RpcSpec

log = logging.getLogger("tunehub.worker")


def refuse(reason: str) -> NoReturn:
    """End a worker that must not start: ``reason`` on stderr, exit status ``os.EX_CONFIG``
    (a configuration error: `service.entry.supervisor` does not restart it)."""
    print(f"tunehub worker: {reason}", file=sys.stderr, flush=True)
    raise SystemExit(os.EX_CONFIG)


def run_worker(
    settings: Settings,
    target_specs: list[str],
    name: str | None = None,
    loglevel: str = "INFO",
    rpc: RpcSpec | None = None,
) -> None:
    """Run a worker for ``target_specs`` ("host" or JSON targets) until it is stopped (blocks).

    The worker records its targets in the store, registers itself (hostname, pid, targets,
    hardware fingerprint) with a heartbeat, and consumes its targets' queues. With ``rpc`` (a
    `tuning.measure.devices.RpcSpec`) it builds here and measures on the device behind the tracker.

    TVM and the tensor intrinsics its targets need are loaded here, once, before the first job
    (see `tuning.hardware.intrinsics`: ~1 s for CPU targets, ~30 s when the CUDA set is needed).

    A worker that measures on this machine runs every candidate in a jail
    (`tuning.measure.kernel_jail`): where isolation cannot be built (not root, no ``unshare``,
    a seccomp profile that forbids namespaces) it refuses to start, before it touches the
    store or the broker. So does a worker that would publish artifacts where an API process of
    the deployment cannot read them (`service.shared.artifact_readers.publishing_problem`).
    A refusal exits with ``os.EX_CONFIG``, which the supervisor does not restart.
    """
    if rpc is None:
        reason = unavailable_reason()
        if reason:
            refuse(
                f"kernels run only in a jail, and isolation is unavailable here: {reason} "
                f"(run the worker as root, or measure on a device with --rpc-*)"
            )
    engine = make_engine(settings.store_url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    problem = publishing_problem(settings, store)
    if problem:
        engine.dispose()
        refuse(f"its artifacts would be lost: {problem}")
    queues: list[str] = []
    target_ids: list[int] = []
    canonicals: list[dict[str, Any]] = []
    machine = host_fingerprint()
    for spec in target_specs:
        target = resolve_named(spec, find_named_target(spec, store))
        row = record_target(store, spec, target, host=machine)
        queues.append(queue_name(row.key))
        target_ids.append(row.id)
        canonicals.append(json.loads(row.canonical_json))
    threads = [n for n in map(target_threads, canonicals) if n is not None]
    if threads and rpc is None:
        # Before any kernel runs: TVM sizes this process's thread pool once
        # (tuning.hardware.threads).
        log.info("CPU kernels may use up to %d threads", pin_runtime_threads(max(threads)))
    loaded = load_tensor_intrinsics(canonicals)
    log.info("tensor intrinsics registered: %s", ", ".join(loaded))
    # An RPC worker's kernels run on the device, not on this machine: it measures nothing here.
    figures = FiguresKeeper(store) if rpc is None else None
    if figures is not None:
        machine = {**machine, "peak_gflops": figures.measure_all(target_ids, canonicals)}
    node = name or f"tunehub-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    context = WorkerContext(
        store=store,
        artifact_dir=settings.artifacts,
        blobs=open_blob_store(settings, engine),
        worker_name=node,
        stale_after=timedelta(seconds=settings.stale_after_s),
        heartbeat_every_s=settings.heartbeat_every_s,
        num_trials_per_iter=settings.num_trials_per_iter,
        timing_ms=settings.timing_ms,
        seed=settings.seed,
        target_ids=tuple(target_ids),
        rpc=rpc,
        figures=figures,
    )
    store.fleet.register(
        node, socket.gethostname(), os.getpid(), target_ids, machine, rpc.as_json() if rpc else None
    )
    context.heartbeat.start_registry()
    app = make_celery(settings)
    register_consumer(app, context)
    log.info("worker %s consuming %s", node, ", ".join(queues))
    try:
        app.worker_main(
            [
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                f"--loglevel={loglevel}",
                f"--hostname={node}",
                "-Q",
                ",".join(queues),
            ]
        )
    finally:
        context.heartbeat.stop()
        store.fleet.stopped(node)
