"""bf16 convolutions (`tuning.search.bf16_conv`'s ``vdpbf16ps`` kernel) on ResNet-18's layers:
the worker's own job for the catalog's ``conv2d`` in bfloat16 (NHWC, the input padded already,
as a bf16 model's convolution reads it) and in float32 (NCHW, padding in the kernel, as the
catalog's default), the same trials each, beside PyTorch's ``conv2d`` in fp32 and in bf16
(channels-last, which goes to oneDNN) on the same threads, one process.

Each job runs `service.worker.execution.run_job` in this process (the packed space's search,
verification in the jail, publication); its published latency is the kernel's, its packed
weight made beforehand. PyTorch's is the fastest of 5 rounds of 20 calls.

    .venv/bin/python bench/bf16_conv.py [--trials 32] [--layers 56,28s,14,7]

A layer ``56`` is the 3x3 64->64 convolution at 56x56 (stride 1), ``28`` 128->128 at 28x28,
``14`` 256->256, ``7`` 512->512; ``28s`` the stride-2 3x3 that enters the 28x28 stage
(64->128 from 56x56), ``14s``/``7s`` likewise, ``28d`` the 1x1 stride-2 downsample.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# name: (C, K, input size before padding, kernel, stride)
LAYERS = {
    "56": (64, 64, 56, 3, 1),
    "28": (128, 128, 28, 3, 1),
    "14": (256, 256, 14, 3, 1),
    "7": (512, 512, 7, 3, 1),
    "28s": (64, 128, 56, 3, 2),
    "14s": (128, 256, 28, 3, 2),
    "7s": (256, 512, 14, 3, 2),
    "28d": (64, 128, 56, 1, 2),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--layers", default="56,28,14,7,28s")
    args = parser.parse_args()

    from schedules_db import Store, make_engine, upgrade_schema
    from service.worker.execution import WorkerContext
    from tuning.hardware.host import physical_cores
    from tuning.hardware.targets import resolve_target

    root = Path(tempfile.mkdtemp(prefix="bf16-conv-bench-"))
    engine = make_engine(f"sqlite:///{root / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine)
    context = WorkerContext(store=store, artifact_dir=root / "artifacts", worker_name="bench")
    target = resolve_target("host")
    row = store.catalog.get_or_create_target(target.canonical, target.kind, target.label, {})
    threads = physical_cores()
    print(f"host {target.canonical}; {threads} threads; the worker's job, {args.trials} trials")
    print("| layer | tunehub bf16 NHWC | tunehub fp32 NCHW | torch fp32 | torch bf16 "
          "| bf16 vs fp32 job | bf16 vs torch bf16 | bf16 kernel |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name in args.layers.split(","):
        c, k, size, kernel, stride = LAYERS[name]
        pad = kernel // 2
        padded = size + 2 * pad
        bf16 = {"layout": "NHWC", "N": 1, "C": c, "H": padded, "W": padded, "K": k,
                "R": kernel, "S": kernel, "stride": stride, "dtype": "bfloat16"}  # fmt: skip
        fp32 = {**bf16, "layout": "NCHW", "H": size, "W": size, "padding": pad,
                "dtype": "float32"}  # fmt: skip
        b_us, flop, tir = _job(store, context, row.id, bf16, args.trials)
        f_us, _, _ = _job(store, context, row.id, fp32, args.trials)
        t32, t16 = (_torch_us(c, k, size, kernel, stride, threads, bf) for bf in (False, True))
        gf = flop / 1e3  # GFLOPS = flop / us / 1e3
        print(f"| {name}: {c}->{k} {kernel}x{kernel}/{stride} at {size} "
              f"| {b_us:.0f} us ({gf / b_us:.0f} GFLOPS) | {f_us:.0f} us ({gf / f_us:.0f}) "
              f"| {t32:.0f} us | {t16:.0f} us | {f_us / b_us:.2f}x | {t16 / b_us:.2f}x "
              f"| {'vdpbf16ps' if 'tunehub_dpbf16ps' in tir else 'widened'} |")  # fmt: skip
    engine.dispose()
    return 0


def _job(store: Any, context: Any, target_id: int, params: dict, trials: int) -> tuple:
    """The worker's job for the catalog's conv2d with ``params``: (published latency in us,
    flop, the published TIR)."""
    from service.worker.execution import run_job
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload
    from tuning.search.spaces import PACKED

    op = get_operator("conv2d")
    spec = catalog_workload("conv2d", op.Params.model_validate(params))
    workload = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, "conv2d", spec.params, spec.flop
    )
    job = store.jobs.create(workload.id, target_id, trials, "q", space=PACKED)
    started = time.perf_counter()
    state = run_job(context, job.id)
    done = store.jobs.get(job.id)
    assert state == "succeeded", done.error
    best = store.schedules.get(done.schedule_id)
    print(f"  {params['dtype']} {params['layout']} job: {time.perf_counter() - started:.0f} s",
          file=sys.stderr)  # fmt: skip
    return best.latency_us, spec.flop, best.tir


def _torch_us(c: int, k: int, size: int, kernel: int, stride: int, threads: int,
              bf16: bool) -> float:  # fmt: skip
    """PyTorch's conv2d of the layer (channels-last; bf16 operands with ``bf16``), fastest of
    5 rounds of 20 calls, in us."""
    import torch

    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if bf16 else torch.float32
    x = torch.randn(1, c, size, size, dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(k, c, kernel, kernel, dtype=dtype).to(memory_format=torch.channels_last)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(20):
                torch.nn.functional.conv2d(x, w, stride=stride, padding=kernel // 2)
            best = min(best, (time.perf_counter() - started) / 20)
    return best * 1e6


if __name__ == "__main__":
    sys.exit(main())
