"""Warm start: do a transferred cost model and seeds from other shapes make a new search converge
faster?

Populates a store by tuning a family of shapes (transfer off: fp32 matmuls, or ResNet-style NHWC
3x3 conv layers scaled to this machine), then tunes a held-out shape twice per repeat from a copy
of that store, same seed and budget: cold (an untrained XGBoost model and a random initial
population, MetaSchedule's default) and warm (the target's model trained on all stored records,
`tuning.search.cost_model`, and the family's best schedules refitted to the held-out shape,
`tuning.search.seeding`, measured as its first batch and seeding its population). Prints, per
repeat,
the trials each needed to reach 95% of the cold run's best performance (latency <= cold best /
0.95), counted in whole measured batches, the warm/cold ratio, and the trials warm needs to
match the cold run's final best. Jobs run through tunehub's job runner in this process, as a
worker would run them.

    .venv/bin/python bench/warm_start.py [--family matmul|conv2d] [--populate-trials 64]
        [--trials 64] [--repeats 3] [--space plain|packed] [--scale 1]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (M, N, K) matmuls.
MATMULS = [(128, 128, 128), (256, 128, 128), (128, 256, 64), (192, 128, 256), (96, 192, 160)]
MATMUL_HELD_OUT = (160, 192, 128)
# (H=W, C, K) NHWC 3x3 pad-1 convolutions, batch 1: ResNet stage shapes with fewer channels.
CONVS = [(28, 32, 32), (28, 32, 64), (14, 64, 64), (14, 64, 128), (7, 128, 128)]
CONV_HELD_OUT = (14, 128, 64)
FAMILIES = {"matmul": (MATMULS, MATMUL_HELD_OUT), "conv2d": (CONVS, CONV_HELD_OUT)}


def _scaled(family: str, shape: tuple[int, int, int], scale: int) -> tuple[int, int, int]:
    """``shape`` with its matmul dimensions (conv: channels C and K) times ``scale``."""
    if family == "matmul":
        return tuple(d * scale for d in shape)
    hw, c, k = shape
    return (hw, c * scale, k * scale)


def _spec(family: str, shape: tuple[int, int, int]):  # noqa: ANN202
    """A catalog workload: a matmul for (M, N, K), an NHWC 3x3 conv for (H=W, C, K)."""
    from tuning.catalog import get_operator
    from tuning.catalog.workload import catalog_workload

    if family == "matmul":
        m, n, k = shape
        return "matmul", catalog_workload("matmul", get_operator("matmul").Params(M=m, N=n, K=k))
    hw, c, k = shape
    params = get_operator("conv2d").Params(
        layout="NHWC", N=1, H=hw, W=hw, C=c, K=k, R=3, S=3, padding=1
    )
    return "conv2d", catalog_workload("conv2d", params)


def _open(path: Path):  # noqa: ANN202
    from schedules_db import Store, make_engine, upgrade_schema
    from tuning.hardware.host import current_tvm_series

    engine = make_engine(f"sqlite:///{path}")
    upgrade_schema(engine)
    return engine, Store(engine, tvm_series=current_tvm_series())


def _job(store, family: str, shape, trials: int, transfer: bool, space: str) -> int:  # noqa: ANN001
    from tuning.hardware.targets import resolve_target

    name, spec = _spec(family, shape)
    host = resolve_target("host")
    tid = store.catalog.get_or_create_target(host.canonical, host.kind, host.label, {}).id
    wid = store.catalog.get_or_create_workload(spec.shash, spec.mod_json, name, spec.params, 1.0).id
    return store.jobs.create(
        wid, tid, trials, "bench", transfer_cost_model=transfer, space=space
    ).id


def _curve(store, job_id: int) -> list[float]:  # noqa: ANN001
    """Best latency after each measured trial, in measurement order."""
    job = store.jobs.get(job_id)
    best, curve = float("inf"), []
    for row in store.records.list_records(job.target_id, job.workload_id, job_id):
        if row.mean_run_us is not None:
            best = min(best, row.mean_run_us)
        curve.append(best)
    return curve


def _trials_to(curve: list[float], threshold_us: float, batch: int) -> int | None:
    """Trials measured until the best reaches ``threshold_us``, rounded up to whole batches of
    ``batch`` (1: the exact trial; a batch is built and measured together, so reaching it
    mid-batch may be said to cost the whole batch)."""
    first = next((i + 1 for i, us in enumerate(curve) if us <= threshold_us), None)
    return None if first is None else min(-(-first // batch) * batch, len(curve))


def main() -> int:
    """Populate, then tune the held-out shape cold and warm per repeat; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", choices=sorted(FAMILIES), default="matmul")
    parser.add_argument("--populate-trials", type=int, default=64)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="candidates per measured batch")
    parser.add_argument("--space", choices=["plain", "packed"], default="plain")
    parser.add_argument(
        "--scale",
        type=int,
        default=1,
        help="multiply every matmul dimension (conv: the channels) by this: bigger kernels, "
        "where a random first batch is further from the best and timing noise matters less",
    )
    args = parser.parse_args()
    family, held_out = FAMILIES[args.family]
    if args.scale != 1:
        family = [_scaled(args.family, shape, args.scale) for shape in family]
        held_out = _scaled(args.family, held_out, args.scale)

    from service.worker.execution import WorkerContext, run_job

    work = Path(tempfile.mkdtemp(prefix="tunehub-warm-"))
    base = work / "populated.db"
    engine, store = _open(base)
    context = WorkerContext(store, work / "artifacts", "bench", num_trials_per_iter=args.batch)
    started = time.monotonic()
    for shape in family:
        job = _job(store, args.family, shape, args.populate_trials, False, args.space)
        assert run_job(context, job) == "succeeded", store.jobs.get(job).error
    print(f"populated {len(family)} shapes x {args.populate_trials} trials "
          f"({store.records.count(1)} records) in {time.monotonic() - started:.0f} s")  # fmt: skip
    engine.dispose()

    rows = []
    for repeat in range(args.repeats):
        curves = {}
        for mode in ("cold", "warm"):
            db = work / f"{mode}-{repeat}.db"
            shutil.copy(base, db)
            engine, store = _open(db)
            ctx = WorkerContext(
                store, work / f"artifacts-{mode}-{repeat}", "bench",
                num_trials_per_iter=args.batch, seed=1000 + repeat,
            )  # fmt: skip
            # The warm side trains the target's model from the populated records.
            shutil.copytree(work / "artifacts", ctx.artifact_dir, dirs_exist_ok=True)
            job = _job(store, args.family, held_out, args.trials, mode == "warm", args.space)
            assert run_job(ctx, job) == "succeeded", store.jobs.get(job).error
            if mode == "warm":
                assert store.jobs.get(job).cost_model, "the warm run found no cost model"
            curves[mode] = _curve(store, job)
            engine.dispose()
        threshold = min(curves["cold"]) / 0.95
        counts = {
            # exact: the trial that first got there; batched: rounded up to its whole batch.
            how: tuple(_trials_to(curves[m], threshold, size) for m in ("cold", "warm"))
            for how, size in (("exact", 1), ("batched", args.batch))
        }
        # How long warm takes to match cold's final best outright.
        warm_full = _trials_to(curves["warm"], min(curves["cold"]), 1)
        rows.append((repeat, min(curves["cold"]), min(curves["warm"]), counts, warm_full))
        print(
            f"repeat {repeat}: cold best {min(curves['cold']):.1f} us, 95% at trial "
            f"{counts['exact'][0]}; warm best {min(curves['warm']):.1f} us, 95% at trial "
            f"{counts['exact'][1]}",
            flush=True,
        )

    print()
    print(f"held-out {args.family} {held_out}, {args.space} space, {args.trials} trials, "
          f"batches of {args.batch}; "
          f"family {family} x {args.populate_trials}")  # fmt: skip
    print("trials to 95% of the cold best: exact = the trial that got there; batched = rounded "
          "up to whole batches of the bench's batch size")  # fmt: skip
    trio = f"{'cold':>5} {'warm':>5} {'ratio':>6}"
    print(f"{'repeat':>6} {'cold best us':>12} {'warm best us':>12} | {trio} | {trio} | "
          f"{'warm to cold best':>17}")  # fmt: skip
    print(f"{'':>6} {'':>12} {'':>12} | {'exact':^18} | {'batched':^18} |")
    ratios: dict[str, list[float]] = {"exact": [], "batched": []}

    def never(n: int | None) -> str:
        return str(n) if n else ">" + str(args.trials)

    for repeat, cold_best, warm_best, counts, warm_full in rows:
        line = f"{repeat:>6} {cold_best:>12.1f} {warm_best:>12.1f}"
        for how in ("exact", "batched"):
            cold_n, warm_n = counts[how]
            # A warm run that never gets there within the budget counts as infinitely slow:
            # leaving it out would make the median flatter the warm start.
            ratio = (warm_n / cold_n) if warm_n else float("inf")
            ratios[how].append(ratio)
            text = f"{ratio:.2f}x" if ratio != float("inf") else "never"
            line += f" | {never(cold_n):>5} {never(warm_n):>5} {text:>6}"
        print(line + f" | {never(warm_full):>17}")
    for how, values in ratios.items():
        if values:
            median = statistics.median(values)
            text = f"{median:.2f}x" if median != float("inf") else "never (inf)"
            print(f"median warm/cold trials to 95% of the cold best, {how}, over {len(values)} "
                  f"repeats (never = infinite): {text} (goal <= 0.25x)")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
