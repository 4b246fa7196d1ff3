"""Whole models end to end: tunehub-tuned TVM vs plain TVM MetaSchedule with the same budget vs
untuned TVM vs ONNX Runtime (CPU provider, threads = cores) vs PyTorch CPU (eager and
``torch.compile``), side by side in one run, with each task's share of tunehub's kernel time
and its % of the roofline (issues 16, 26).

Models, as a user has them: PyTorch modules with random weights, batch 1
(`bench/torch_zoo.py`), exported with ``torch.onnx.export`` for ONNX Runtime and tunehub:

    resnet18     torchvision's ResNet-18, 1x3x224x224
    mobilenetv2  torchvision's MobileNet-V2 (width 1.0), 1x3x224x224
    bert         a BERT-base encoder layer, sequence 128, hidden 768, 12 heads, FFN 3072
    cnn          a small CNN, 1x3x32x32

Each model gets a budget of ``--trials-per-task`` x its task count, spent:

* by tunehub: a fresh `tunehub serve` (its worker warmed up by one small job first) tunes the
  model (`submit_model` .. `wait_model`: the *tuning wall*, parse and compile included); then
  `relax_build.build` compiles this process's own module with the fetched schedules (the
  *fetch-only build wall*: the pipeline, one lookup, the compile);
* by plain TVM, in this process: what `relax.pipeline.static_shape_tuning_pipeline(total,
  target, work_dir, cpu_weight_prepack=True, max_trials_per_task=N)` does: `tune_relax` on the
  same tasks (MetaSchedule's defaults: 64 candidates a batch, gradient task scheduler; only the
  builder's timeout raised), the weights prepacked after tuning, compiled (*plain tune s*).

Untuned TVM is the same pipeline with no records. PyTorch eager runs the module itself, in
inference mode (`bench/model_torch.py`). Everything but
``torch.compile`` is timed in this process, interleaved over ``--rounds`` (median of rounds,
each the median of ``--repeat`` samples of at least 0.1 s), on the same ``BENCH_THREADS``
threads (default: the target's cores); every output is checked against untuned TVM's.
``torch.compile`` is timed alone in a fresh process (`model_torch.py` run as a script; next
to TVM's pool it measured 10x slower than eager) and checked against eager there. The walls:
tunehub's tuning, plain MetaSchedule's, and a build that only fetches next to an
untuned build of the same module (the difference is what a warm service adds).

With ``--bf16`` (issue 39) the row also gets bf16 columns: PyTorch under
``torch.autocast("cpu", dtype=torch.bfloat16)``, eager (interleaved) and ``torch.compile`` (fresh
process), and, where the host has AVX512-BF16, tunehub's model job with ``precision:
"bfloat16"`` (its own budget, same trials per task) built with ``precision="bfloat16"``; each
with its relative error and cosine similarity against float32 (untuned TVM; torch.compile
against fp32 eager). On a host without the instructions the service refuses the bf16 job
(422), and the row says so.

The budget curve (``--budget-curve 8,16,32,64``, of ResNet-18, or ``--curve-model``): the
same server tunes it with 8, then 16, 32, 64 trials per task, each continuing from the records
of the last (a step the rows tuned already is all cache hits), and after each the fetched
build's latency and the step's tuning wall are printed. Then, on that server, the same model at
another size (``--neighbour-size``, every task new to the server) is built with
``allow_neighbour`` and ``tune_missing``: how long its first build takes to send its tasks and
get neighbour answers, how long a lookup of those answers takes afterwards, and its latency
against the untuned build.

    .venv/bin/pip install -e '.[bench]'      # torch: the models are PyTorch modules
    .venv/bin/python bench/model.py [--models bert,resnet18,mobilenetv2,cnn] [--trials-per-task 64]
        [--budget-curve 8,16,32,64] [--neighbour-size 192] [--skip-rows] [--skip-torch]
        [--skip-plain] [--server URL] [--bf16] [--skip-fp32]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from kernel_quality import bound, free_port, settle, time_callable  # noqa: E402
from model_neighbours import neighbour_answers  # noqa: E402
from model_report import Row, print_table, task_rows  # noqa: E402
from model_torch import compiled_latency, cosine, torch_callable  # noqa: E402
from torch_zoo import MODULES, export_onnx, input_shape, make_module  # noqa: E402

from service.client import TunehubClient  # noqa: E402
from service.client.models import submit_model, wait_model  # noqa: E402

# The image models (at another input size, every task a new shape: for neighbour answers).
IMAGE_MODELS = ("cnn", "resnet18", "mobilenetv2")
BUILD_TIMEOUT_S = 180  # plain MetaSchedule's LocalBuilder (stock: 30 s)
TOLERANCE = 1e-3  # max |out - untuned TVM's| over max |untuned TVM's|
MIN_COSINE = 0.999  # a bf16 way against float32 (the service's own model check)
BF16 = "bf16"  # in the name of every reduced-precision way


# -- servers ---------------------------------------------------------------------------------


@contextlib.contextmanager
def serve(url: str | None) -> Iterator[TunehubClient]:
    """A client of ``url``, or of a fresh `tunehub serve` (own data folder, free port) that
    lives as long as the block, its worker warmed up by one small job."""
    proc, data_dir = None, None
    if url is None:
        data_dir = Path(tempfile.mkdtemp(prefix="tunehub-bench-model-"))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.entry.cli", "serve", "--port", str(port),
             "--data-dir", str(data_dir)],
            stdout=open(data_dir / "serve.log", "wb"),  # noqa: SIM115 - lives as long as serve
            stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        with TunehubClient(url, timeout=600) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    client.targets()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            if proc is not None:  # the first job waits for the worker's TVM imports
                warm = client.submit("matmul", {"M": 16, "N": 16, "K": 16}, "host", 1)
                client.wait(warm["id"], poll_s=1)
            yield client
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)


def tune_with_tunehub(client: TunehubClient, model: Any, shape: list[int], trials: int,
                      folder: Path, precision: str = "float32",
                      ) -> tuple[float, dict[str, Any]]:  # fmt: skip
    """Submit ``model`` in ``precision`` with ``trials`` in total and wait until it is
    compiled; the wall (s) and the model as the server shows it (its tasks included)."""
    path = folder / f"{model.graph.name}.onnx"
    onnx.save(model, path)
    inputs = [{"name": "x", "shape": shape, "dtype": "float32"}]
    started = time.monotonic()
    submitted = submit_model(client, path, inputs, trials, precision=precision)
    done = wait_model(client, submitted["id"], poll_s=2)
    wall = time.monotonic() - started
    if done["state"] != "succeeded":
        raise SystemExit(f"model {done['id']} {done['state']}: {done['error']}")
    failed = done["progress"]["tasks_failed"]
    print(f"  tunehub ({precision}): {done['progress']['tasks']} tasks, {trials} trials in "
          f"{wall:.0f} s; "
          f"{done['result']['tasks_applied']} tasks tuned, {failed} task jobs failed",
          flush=True)  # fmt: skip
    return wall, done


# -- the ways --------------------------------------------------------------------------------


def tvm_ways(mod: Any, target: Any, client: TunehubClient, budget: tuple[int, int],
             folder: Path, row: Row, skip_plain: bool = False,
             fetch: bool = True) -> dict[str, Any]:  # fmt: skip
    """The TVM builds of ``mod`` as Relax VMs: tunehub's fetched build (not without
    ``fetch``), plain MetaSchedule's with the same budget (total, per task; not with
    ``skip_plain``), untuned."""
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    from service.client.relax_build import build
    from tuning.models.pipeline import compile_with, tuning_pipeline

    def vm(executable: Any) -> Any:
        return relax.VirtualMachine(executable, tvm.cpu())

    fetched = {}
    if fetch:
        started = time.monotonic()
        fetched["tunehub"] = vm(build(mod, target, client=client))
        row.wall["fetch build"] = time.monotonic() - started
    started = time.monotonic()
    untuned = compile_with(tuning_pipeline(mod, target), target, ms.database.MemoryDatabase())
    row.wall["untuned build"] = time.monotonic() - started
    # Plain MetaSchedule: what static_shape_tuning_pipeline(cpu_weight_prepack=True) does (its
    # passes are `tuning_pipeline` and `compile_with`), through tune_relax so that the builder's
    # timeout can be raised: the stock 30 s killed every build here (each fresh builder process
    # imports TVM's tensor intrinsics, ~26 s on 2 loaded cores).
    total, per_task = budget
    if skip_plain:
        return {**fetched, "untuned": vm(untuned)}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=folder) as work_dir:
        fused = tuning_pipeline(mod, target)
        database = ms.relax_integration.tune_relax(
            fused, {}, target, work_dir, max_trials_global=total, max_trials_per_task=per_task,
            builder=ms.builder.LocalBuilder(timeout_sec=BUILD_TIMEOUT_S),
        )  # fmt: skip
        plain = compile_with(fused, target, database)
    row.wall["plain tune"] = time.monotonic() - started
    print(f"  plain TVM: {total} trials in {row.wall['plain tune']:.0f} s", flush=True)
    return {**fetched, "plain TVM": vm(plain), "untuned": vm(untuned)}


def measure(row: Row, ways: dict[str, Callable[[], np.ndarray]], rounds: int,
            repeat: int) -> None:  # fmt: skip
    """Check every way's output against untuned TVM's (relative to its largest magnitude: the
    random weights make ResNet-18's outputs ~1e10; a bf16 way by its cosine too), then time
    them interleaved."""
    reference = ways["untuned"]()
    scale = max(float(np.max(np.abs(reference))), 1e-30)
    for name, fn in ways.items():
        out = fn()
        row.error[name] = float(np.max(np.abs(out - reference))) / scale
        if BF16 in name:
            similarity = cosine(out, reference)
            row.notes.append(
                f"{name}: cosine {similarity:.6f} to float32 (untuned TVM)"
                + ("" if similarity >= MIN_COSINE else f", under {MIN_COSINE}")
            )
        elif row.error[name] > TOLERANCE:
            row.notes.append(f"{name} differs from untuned TVM by {row.error[name]:.2g}")
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, fn in ways.items():
            settle()
            samples[name].append(time_callable(fn, repeat) * 1e3)
    row.ms = {name: statistics.median(s) for name, s in samples.items()}


def ort_callable(model: Any, threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """ONNX Runtime's CPU provider on ``model`` (every graph optimisation, ``threads`` intra-op
    threads, sequential execution): what a user who deploys with ONNX Runtime runs."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return lambda x: np.asarray(session.run(None, {"x": x})[0])


def bench_model(name: str, client: TunehubClient, args: argparse.Namespace, folder: Path) -> Row:
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    from tuning.models.pipeline import extract, tuning_pipeline

    shape = input_shape(name)
    model = export_onnx(make_module(name), shape)
    mod = from_onnx(model, shape_dict={"x": shape}, keep_params_in_input=False)
    target = tvm.target.Target(client.targets()["host"]["canonical"])
    tasks = len(extract(tuning_pipeline(mod, target), target))
    row = Row(name, tasks, tasks * args.trials_per_task)
    print(f"{name}: {tasks} tasks, {row.trials} trials", flush=True)
    if args.skip_fp32:
        row.wall["tunehub tune"] = row.wall["fetch build"] = float("nan")
    else:
        row.wall["tunehub tune"], tuned = tune_with_tunehub(client, model, shape, row.trials,
                                                            folder)  # fmt: skip
        row.fp32_tasks = task_rows(client, tuned)
    vms = tvm_ways(mod, target, client, (row.trials, args.trials_per_task), folder, row,
                   args.skip_plain, fetch=not args.skip_fp32)  # fmt: skip
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    data = tvm.runtime.tensor(x)
    ways = {way: bound(vm["main"], data) for way, vm in vms.items()}
    # TVM's pool starts before PyTorch's: the other order slowed eager 30x here (0.3 -> 9 ms).
    for run in ways.values():
        run()
    ways["onnxruntime"] = bound(ort_callable(model, tvm.runtime.num_threads()), x)
    if args.bf16:
        bf16_build = tunehub_bf16(client, mod, model, shape, target, args, folder, row)
        if bf16_build is not None:
            ways[f"tunehub {BF16}"] = bound(bf16_build, data)
    if not args.skip_torch:
        ways["torch eager"] = bound(torch_callable(name, False), x)
        if args.bf16:
            ways[f"torch {BF16}"] = bound(torch_callable(name, False, bf16=True), x)
    measure(row, ways, args.rounds, args.repeat)
    if not args.skip_torch:
        for way, bf16 in (("torch.compile", False), (f"torch.compile {BF16}", True)):
            if bf16 and not args.bf16:
                continue
            compiled = compiled_latency(name, args.repeat, bf16)
            if isinstance(compiled, str):
                row.notes.append(compiled)
                continue
            row.ms[way], error, similarity = compiled
            row.notes.append(f"{way} timed alone in a fresh process (vs fp32 eager: max rel. "
                             f"error {error:.1e}, cosine {similarity:.6f}), not interleaved "
                             "with the others")  # fmt: skip
    return row


def tunehub_bf16(client: TunehubClient, mod: Any, model: Any, shape: list[int], target: Any,
                 args: argparse.Namespace, folder: Path, row: Row) -> Any:  # fmt: skip
    """tunehub's bf16 model (`--bf16`): tuned with the same trials per task as the float32
    row, fetched and built in bf16; its VM's ``main``, or None (and a note) where the host has
    no AVX512-BF16."""
    import tvm
    from tvm import relax

    from service.client.relax_build import build
    from tuning.hardware.bf16 import has_bf16_dot
    from tuning.models.pipeline import extract, tuning_pipeline

    if not has_bf16_dot(target):
        row.notes.append(f"tunehub {BF16}: the host target has no AVX512-BF16 (the service "
                         "refuses a bf16 model there: 422 missing_cpu_feature)")  # fmt: skip
        return None
    fused = tuning_pipeline(mod, target, precision="bfloat16")
    trials = len(extract(fused, target)) * args.trials_per_task
    wall, tuned = tune_with_tunehub(client, model, shape, trials, folder, precision="bfloat16")
    row.wall[f"tunehub {BF16} tune"] = wall
    row.bf16_tasks = task_rows(client, tuned)
    executable = build(mod, target, client=client, precision="bfloat16")
    return relax.VirtualMachine(executable, tvm.cpu())["main"]


def budget_curve(
    client: TunehubClient, args: argparse.Namespace, steps: list[int], folder: Path
) -> tuple[list[tuple[int, int, float, float]], list[str]]:
    """``--curve-model`` on the server of ``client``, tuned with each per-task budget in turn (each
    continuing from the records of the last: a step the rows already tuned is all cache hits):
    (trials per task, total, latency ms, tuning wall of the step); then the neighbour answers
    of that model at another input size (`neighbour_answers`' lines)."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    from service.client.relax_build import build
    from tuning.models.pipeline import extract, tuning_pipeline

    shape = input_shape(args.curve_model)
    model = export_onnx(make_module(args.curve_model), shape)
    mod = from_onnx(model, shape_dict={"x": shape}, keep_params_in_input=False)
    data = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(shape).astype("float32"))
    points: list[tuple[int, int, float, float]] = []
    target = tvm.target.Target(client.targets()["host"]["canonical"])
    tasks = len(extract(tuning_pipeline(mod, target), target))
    for per_task in steps:
        print(f"budget curve: {per_task} trials per task", flush=True)
        wall, _ = tune_with_tunehub(client, model, shape, per_task * tasks, folder)
        main = relax.VirtualMachine(build(mod, target, client=client), tvm.cpu())["main"]
        settle()
        ms = time_callable(bound(main, data), args.repeat) * 1e3
        points.append((per_task, per_task * tasks, ms, wall))
        print(f"  {per_task} trials per task: {ms:.3f} ms", flush=True)
    size = args.neighbour_size
    lines = neighbour_answers(client, target, args.repeat, args.curve_model, size) if size else []
    return points, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="bert,resnet18,mobilenetv2")
    parser.add_argument("--trials-per-task", type=int, default=64)
    parser.add_argument("--budget-curve", default="8,16,32,64", help="'' to skip")
    parser.add_argument(
        "--skip-torch",
        action="store_true",
        help="no PyTorch timings (the models are still its modules)",
    )
    parser.add_argument(
        "--skip-plain",
        action="store_true",
        help="no plain MetaSchedule build (it tunes as long as tunehub does)",
    )
    parser.add_argument("--server", help="a running tunehub (default: start a fresh one)")
    parser.add_argument("--skip-fp32", action="store_true",
                        help="no fp32 model job (its columns '-' or nan), no budget curve: "
                        "with --bf16, the bf16 model against ONNX Runtime and PyTorch")  # fmt: skip
    parser.add_argument("--bf16", action="store_true",
                        help="bf16 columns: PyTorch autocast, and tunehub's bf16 model where the "
                        "host has AVX512-BF16 (issue 39)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--skip-rows",
        action="store_true",
        help="only the budget curve (and the neighbour answers after it)",
    )
    parser.add_argument(
        "--curve-model",
        default="resnet18",
        choices=IMAGE_MODELS,
        help="the model of the budget curve and the neighbour answers",
    )
    parser.add_argument("--neighbour-size", type=int, default=192,
                        help="after the curve, the curve's model at this size gets neighbour "
                        "answers (0: skip)")  # fmt: skip
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    unknown = set(models) - set(MODULES)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}: choose from {', '.join(MODULES)}")
    steps = [int(s) for s in args.budget_curve.split(",") if s]

    from tuning.hardware.targets import resolve_target
    from tuning.hardware.threads import pin_runtime_threads

    cores = int(resolve_target("host").canonical.get("num-cores", os.cpu_count() or 1))
    threads = pin_runtime_threads(int(os.environ.setdefault("BENCH_THREADS", str(cores))))
    if not args.skip_torch:
        import torch

        torch.set_num_threads(threads)
        print(f"torch {torch.__version__} on {torch.get_num_threads()} threads")
    print(f"TVM on {threads} threads; 1-min load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tunehub-bench-model-") as tmp:
        rows: list[Row] = []
        curve: list[tuple[int, int, float, float]] = []
        neighbours: list[str] = []
        with serve(args.server) as client:
            for name in [] if args.skip_rows else models:
                rows.append(bench_model(name, client, args, Path(tmp)))
                print_table(rows[-1:], threads)  # as soon as measured
            if steps and args.curve_model in models and not args.skip_fp32:
                curve, neighbours = budget_curve(client, args, steps, Path(tmp))
    if rows:
        print_table(rows, threads)
    if curve:
        print(f"\n{args.curve_model} budget curve (each step continuing the last's records):")
        print(f"{'trials/task':>11} {'trials':>7} {'latency ms':>11} {'step wall s':>11}")
        for per_task, total, ms, wall in curve:
            print(f"{per_task:>11} {total:>7} {ms:>11.3f} {wall:>11.0f}")
    for line in neighbours:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
