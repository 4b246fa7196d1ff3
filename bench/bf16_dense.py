"""The bf16 kernels (`tuning.search.bf16_dot`'s ``vdpbf16ps`` micro-kernel and, where the host
has AMX, `tuning.search.amx_tiles`'s tile kernel) on BERT-base's dense shapes (M = 128: the
catalog's ``matmul`` in bfloat16, its weight ``[K, N]``), against the machine's measured bf16
and fp32 peaks and against PyTorch on the same threads (``torch.matmul`` in bf16, which goes to
oneDNN, and in fp32), one process.

For each shape, every register block (rows x vectors of 16 columns) and k block of a small grid
of the ``vdpbf16ps`` kernel, and every column blocks per task of the AMX kernel, is compiled,
checked against a float64 product of the same bf16 inputs (relative error), and timed with its
weight packed beforehand (``main_packed``, as an artifact's caller does); the best of each is
reported, then the best of each kernel and PyTorch are timed again in interleaved rounds (a
2-core VM's neighbours swing a figure 2x from one second to the next). A sweep of the decisions
the search samples (`bf16_tiles`, `amx_tiles`), not the search: what the kernels can reach.

With ``--trials N`` it runs the worker's own job instead (`service.worker.execution.run_job`
in this process: the packed space's search, verification in the jail, publication) for the
catalog's ``dense`` (weight ``[N, K]``) in bfloat16 and in float32, N trials each, and prints
the published latencies side by side.

    .venv/bin/python bench/bf16_dense.py [--shapes 768x768,3072x768,768x3072,2304x768]
    .venv/bin/python bench/bf16_dense.py --trials 32
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

M = 128
ROWS = (4, 8, 16)
VECTORS = (1, 2, 4)
K_PAIRS = (32, 64, 128)  # k blocks of 64, 128, 256
ROUNDS = 5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="768x768,3072x768,768x3072,2304x768",
                        help="N x K of each dense (M = 128)")  # fmt: skip
    parser.add_argument("--trials", type=int, default=0,
                        help="run the worker's job, this budget, instead")  # fmt: skip
    args = parser.parse_args()
    if args.trials:
        return search(args.shapes, args.trials)

    from tuning.hardware.host import host_target_spec, physical_cores
    from tuning.hardware.threads import pin_runtime_threads

    threads = physical_cores()
    os.environ["OMP_NUM_THREADS"] = str(threads)
    pin_runtime_threads(threads)

    import ml_dtypes
    import numpy as np
    import torch
    import tvm

    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.bf16 import AMX, bf16_unit
    from tuning.hardware.peak import target_peak_gflops
    from tuning.hardware.peak_bf16 import target_bf16_peak
    from tuning.search.amx_tiles import TASK_BLOCKS, amx_tiles
    from tuning.search.bf16_dot import bf16_tiles
    from tuning.search.spaces import PACKED, space_module

    torch.set_num_threads(threads)
    spec = host_target_spec()
    target = tvm.target.Target(spec)
    if bf16_unit(target) is None:
        raise SystemExit(f"the host target ({spec}) has no bf16 unit")
    fp32_peak = target_peak_gflops(spec) or 0.0
    unit, bf16_peak = target_bf16_peak(spec) or ("none", 0.0)
    print(f"host {spec}; {threads} threads; fp32 FMA peak {fp32_peak:.0f} GFLOPS, "
          f"bf16 peak ({unit}) {bf16_peak:.0f} GFLOPS")  # fmt: skip
    print("| N x K | vdpbf16ps (rows, vectors, kc) | AMX (column blocks a task) | % bf16 peak "
          "| rel. error | torch bf16 | torch fp32 | vs torch bf16 | vs torch fp32 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    amx = bf16_unit(target) == AMX
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        n, k = (int(x) for x in shape.split("x"))
        flop = 2.0 * M * n * k
        a = rng.uniform(-1, 1, (M, k)).astype(ml_dtypes.bfloat16)
        b = rng.uniform(-1, 1, (k, n)).astype(ml_dtypes.bfloat16)
        expected = a.astype(np.float64) @ b.astype(np.float64)
        started = time.perf_counter()
        op = get_operator("matmul")
        spec = catalog_workload("matmul", op.Params(M=M, N=n, K=k, dtype="bfloat16"))
        mod = space_module(spec.mod, PACKED, op.constant_operands)
        dot = [
            (choice, functools.partial(bf16_tiles, fixed=choice))
            for choice in itertools.product(ROWS, VECTORS, K_PAIRS)
            if not (M % choice[0] or (n // 16) % choice[1] or k % (2 * choice[2]))
        ]
        tiles = [(t, functools.partial(amx_tiles, task=t)) for t in TASK_BLOCKS if amx]
        bests, errors = [], []
        for kernels in (dot, tiles):
            runs = [_compiled(mod, tile, target, a, b, M, n) for _, tile in kernels]
            for run in runs:
                errors.append(float(np.abs(run.out() - expected).max() / np.abs(expected).max()))
            secs = [run.secs(1) for run in runs]
            bests.append((min(secs), kernels[secs.index(min(secs))][0], runs[secs.index(min(secs))])
                         if runs else None)  # fmt: skip
        ta = torch.from_numpy(a.astype(np.float32))
        tb = torch.from_numpy(b.astype(np.float32))
        # Interleaved rounds: the best of each side over the same stretch of the machine.
        found = {"dot": [], "amx": [], "torch_bf16": [], "torch_fp32": []}
        for _ in range(ROUNDS):
            for name, best in zip(("dot", "amx"), bests, strict=True):
                if best is not None:
                    found[name].append(best[2].secs(1))
            found["torch_bf16"].append(_torch_secs(ta.bfloat16(), tb.bfloat16()))
            found["torch_fp32"].append(_torch_secs(ta, tb))
        fastest = {name: min(x) if x else float("nan") for name, x in found.items()}
        ours = min(fastest["dot"], fastest["amx"])
        print(f"| {n} x {k} | {_cell(flop, fastest['dot'], bests[0])} "
              f"| {_cell(flop, fastest['amx'], bests[1])} "
              f"| {100 * flop / ours / 1e9 / bf16_peak:.0f}% | {max(errors):.1e} "
              f"| {fastest['torch_bf16'] * 1e6:.0f} us | {fastest['torch_fp32'] * 1e6:.0f} us "
              f"| {fastest['torch_bf16'] / ours:.2f}x "
              f"| {fastest['torch_fp32'] / ours:.2f}x |")  # fmt: skip
        print(f"  (swept in {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


class _Compiled:
    """A kernel compiled with its weight packed and its operands on the device."""

    def __init__(self, lib: Any, entry: str, args: list[Any], dev: Any) -> None:
        self.lib, self.entry, self.args, self.dev = lib, entry, args, dev

    def out(self) -> Any:
        self.lib[self.entry](*self.args)
        return self.args[-1].numpy()

    def secs(self, repeat: int) -> float:
        """Fastest of 5 x ``repeat`` runs of 10 calls (50 ms at least), per call."""
        timer = self.lib.time_evaluator(self.entry, self.dev, number=10, repeat=5 * repeat,
                                        min_repeat_ms=50)  # fmt: skip
        return float(min(timer(*self.args).results))


def _compiled(mod: Any, tile: Any, target: Any, a: Any, b: Any, m: int, n: int) -> _Compiled:
    """``mod``'s matmul block scheduled by ``tile(sch, block, found)`` and the packed space's
    postprocessors (tensorize, parallelise, as a candidate of the search), compiled for
    ``target`` with ``b`` packed by its pack function; ``a`` and an output on the CPU."""
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext

    from tuning.publish.packing import split_packed
    from tuning.search.bf16_dot import bf16_axes
    from tuning.search.spaces import PACKED, space_generator

    sch = tvm.s_tir.Schedule(mod)
    block = sch.get_sblock("C")
    found = bf16_axes(sch, block, budget=28)
    assert found is not None, "the bf16 kernels do not take this matmul"
    tile(sch, block, found)
    root = sch.get_sblock("root")
    sch.annotate(root, "meta_schedule.parallel", 16 * int(target.attrs["num-cores"]))
    sch.annotate(root, "meta_schedule.vectorize", 64)
    context = TuneContext(mod=mod, target=target, space_generator=space_generator(PACKED, target))
    assert all(post.apply(sch) for post in context.space_generator.postprocs)
    split = split_packed(sch.mod, drop_in=False)
    lib = tvm.compile(split.mod, target=target).mod
    dev = tvm.cpu(0)
    (param,) = split.packed
    packed = tvm.runtime.empty(param.packed_shape, "bfloat16", dev)
    lib[param.function](tvm.runtime.tensor(b, dev), packed)
    args = [tvm.runtime.tensor(a, dev), packed, tvm.runtime.empty((m, n), "float32", dev)]
    return _Compiled(lib, split.entry, args, dev)


def _cell(flop: float, secs: float, best: tuple[float, Any, Any] | None) -> str:
    if best is None:
        return "-"
    return f"{flop / secs / 1e9:.0f} GFLOPS ({secs * 1e6:.0f} us) {best[1]}"


def search(shapes: str, trials: int) -> int:
    """The worker's job on the catalog's dense in bf16 and fp32 for each shape (module doc)."""
    import tempfile

    from schedules_db import Store, make_engine, upgrade_schema
    from service.worker.execution import WorkerContext, run_job
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.hardware.targets import resolve_target
    from tuning.search.spaces import resolve_space

    root = Path(tempfile.mkdtemp(prefix="bf16-bench-"))
    engine = make_engine(f"sqlite:///{root / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine)
    context = WorkerContext(store=store, artifact_dir=root / "artifacts", worker_name="bench")
    target = resolve_target("host")
    row = store.catalog.get_or_create_target(target.canonical, target.kind, target.label, {})
    op = get_operator("dense")
    space = resolve_space("auto", op.constant_operands, target.kind)
    print(f"host {target.canonical}; the worker's job, {trials} trials each, packed space")
    print("| M x N x K | bf16 | fp32 | bf16 vs fp32 | bf16 kernel | tuning wall (bf16 / fp32) |")
    print("|---|---|---|---|---|---|")
    for shape in shapes.split(","):
        n, k = (int(x) for x in shape.split("x"))
        found = {}
        for dtype in ("bfloat16", "float32"):
            spec = catalog_workload("dense", op.Params(M=M, N=n, K=k, dtype=dtype))
            workload = store.catalog.get_or_create_workload(
                spec.shash, spec.mod_json, "dense", spec.params, spec.flop
            )
            job = store.jobs.create(workload.id, row.id, trials, "q", space=space)
            started = time.perf_counter()
            state = run_job(context, job.id)
            wall = time.perf_counter() - started
            done = store.jobs.get(job.id)
            assert state == "succeeded", done.error
            best = store.schedules.get(done.schedule_id)
            found[dtype] = (best.latency_us, spec.flop, wall, _kernel(best.tir))
        (b_us, flop, b_wall, kernel), (f_us, _, f_wall, _) = found["bfloat16"], found["float32"]
        print(f"| {M} x {n} x {k} | {b_us:.0f} us ({flop / b_us / 1e3:.0f} GFLOPS) "
              f"| {f_us:.0f} us ({flop / f_us / 1e3:.0f} GFLOPS) | {f_us / b_us:.2f}x "
              f"| {kernel} | {b_wall:.0f} s / {f_wall:.0f} s |")  # fmt: skip
    engine.dispose()
    return 0


def _kernel(tir: str) -> str:
    """Which kernel a published schedule's TIR is: AMX tiles, ``vdpbf16ps`` or widened."""
    if "tdpbf16ps" in tir:
        return "AMX tiles"
    return "vdpbf16ps" if "tunehub_dpbf16ps" in tir else "widened"


def _torch_secs(a: object, b: object) -> float:
    """Fastest of 5 rounds of 20 ``torch.matmul`` calls, per call."""
    import torch

    best = float("inf")
    with torch.inference_mode():
        for _ in range(3):
            torch.matmul(a, b)  # type: ignore[call-overload]
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(20):
                torch.matmul(a, b)  # type: ignore[call-overload]
            best = min(best, (time.perf_counter() - start) / 20)
    return best


if __name__ == "__main__":
    sys.exit(main())
