"""The neighbour answers `bench/model.py`'s budget curve ends with: a model at an input size
the server has never seen, built with ``allow_neighbour`` and ``tune_missing`` against the
server that tuned it at its benchmark size."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from kernel_quality import bound, settle, time_callable
from torch_zoo import export_onnx, input_shape, make_module

from service.client import TunehubClient


def neighbour_answers(
    client: TunehubClient, target: Any, repeat: int, name: str, size: int
) -> list[str]:
    """Model ``name`` at ``size``x``size`` (every task a shape the server has never seen)
    built against the server that tuned it at its benchmark size, with ``allow_neighbour`` and
    ``tune_missing``: the first build's wall (sends its tasks, which are refitted in the jail),
    a second build's (answers served from the store), one lookup of the answered tasks, and
    the latency of the neighbour-answered build against the untuned one."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    from service.client.relax_build import build
    from service.client.tvm_database import TunehubDatabase
    from tuning.models.pipeline import compile_with, tuning_pipeline

    shape = input_shape(name, size)
    model = export_onnx(make_module(name), shape)
    mod = from_onnx(model, shape_dict={"x": shape}, keep_params_in_input=False)
    started = time.monotonic()
    database = TunehubDatabase(client, target, cache=False, allow_neighbour=True,
                               tune_missing=True)  # fmt: skip
    answered = database.prefetch(mod)
    first = time.monotonic() - started
    states = [s["state"] for s in database.sent.values()]
    neighbours = [h for h, s in database.sent.items() if s["state"] == "neighbour"]
    # The jobs the answers queued would tune beside the timings below: cancel them.
    for job_id in {s["job_id"] for s in database.sent.values() if s["job_id"] is not None}:
        client.cancel(job_id)
    time.sleep(5)  # a running one stops after its current batch
    started = time.monotonic()
    with_neighbours = build(mod, target, client=client, allow_neighbour=True)
    second = time.monotonic() - started
    started = time.monotonic()
    client.lookup("host", neighbours, allow_neighbour=True)
    one_lookup = time.monotonic() - started
    untuned = compile_with(tuning_pipeline(mod, target), target, ms.database.MemoryDatabase())
    data = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(shape).astype("float32"))
    runs = {way: relax.VirtualMachine(ex, tvm.cpu())["main"]
            for way, ex in (("neighbours", with_neighbours), ("untuned", untuned))}  # fmt: skip
    latency = {}
    for way, main in runs.items():
        settle()
        latency[way] = time_callable(bound(main, data), repeat) * 1e3
    counts = {state: states.count(state) for state in sorted(set(states))}
    return [
        f"{name} at {size}x{size} against the server that tuned it at {input_shape(name)[-1]}² "
        f"(allow_neighbour, tune_missing): {len(states)} tasks sent, states {counts}",
        f"  first build's prefetch (upload, jail parse, refit of {len(neighbours)} answers, "
        f"lookups): {first:.1f} s; {answered} tasks answered",
        f"  a second build (answers served from the store), pipeline and compile included: "
        f"{second:.1f} s; one lookup of the {len(neighbours)} answered tasks: "
        f"{one_lookup * 1e3:.0f} ms",
        f"  latency with neighbour answers {latency['neighbours']:.2f} ms vs untuned "
        f"{latency['untuned']:.2f} ms ({latency['untuned'] / latency['neighbours']:.1f}x)",
    ]
