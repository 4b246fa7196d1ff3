"""Every catalog operator and layout, tuned for a couple of trials on the local target by the
worker's job runner in the space a job gets by default (packed weights for operators that have
them), verified against its reference and exported."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tvm

from schedules_db import Store, make_engine, upgrade_schema
from service.worker.execution import WorkerContext, run_job
from tests.tuning.catalog_cases import CASES, case_id
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.targets import resolve_target
from tuning.ir import arg_specs
from tuning.measure.timing import run_module
from tuning.publish.packing import PackedParam
from tuning.publish.verify import check_close
from tuning.search.spaces import resolve_space

TRIALS = 2
# Each case costs 10-50 s here; CI tunes one case per kind of kernel (contraction in fp16 and
# int8, NHWC conv with its layout-transform trace, depthwise, a reduction), and
# TUNEHUB_TEST_ALL_OPERATORS=1 tunes all 59 cases (~23 min on 2 cores). Every case's unscheduled
# kernel is checked against its reference in test_catalog_references.py either way.
CI_CASES = {
    "matmul-float16",
    "dense-bias-bfloat16",
    "conv2d-NCHW-int8",
    "conv2d-NHWC",
    "depthwise_conv2d-NHWC",
    "softmax",
}
TUNED = [c for c in CASES if os.environ.get("TUNEHUB_TEST_ALL_OPERATORS") or case_id(c) in CI_CASES]


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerContext]:
    root: Path = tmp_path_factory.mktemp("catalog")
    engine = make_engine(f"sqlite:///{root / 'store.db'}")
    upgrade_schema(engine)
    yield WorkerContext(
        store=Store(engine),
        artifact_dir=root / "artifacts",
        worker_name="pytest-catalog",
        num_trials_per_iter=TRIALS,
    )
    engine.dispose()


@pytest.mark.parametrize("case", TUNED, ids=[case_id(c) for c in TUNED])
def test_operator_tunes_and_verifies(case: tuple[str, dict], context: WorkerContext) -> None:
    name, raw = case
    store = context.store
    spec = catalog_workload(name, get_operator(name).Params.model_validate(raw))
    target = resolve_target("host")
    target_row = store.catalog.get_or_create_target(target.canonical, target.kind, target.label, {})
    workload = store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, name, spec.params, spec.flop
    )
    op = get_operator(name)
    space = resolve_space("auto", op.constant_operands, target.kind)
    job = store.jobs.create(workload.id, target_row.id, TRIALS, "q", space=space)
    if job.cache_hit:
        # conv2d_bn_relu with folded BN is the same function as conv2d_bias_relu: one workload,
        # tuned once (when both run); its served kernel is checked against the unfolded BN below.
        assert name == "conv2d_bn_relu"
    else:
        assert run_job(context, job.id) == "succeeded", store.jobs.get(job.id).error
        # Small spaces (elementwise ops) may hold fewer distinct schedules than the budget: a
        # re-measured trace is not stored twice.
        assert 1 <= store.records.count(target_row.id, workload.id, job.id, space) <= TRIALS
    sched = store.schedules.get(store.jobs.get(job.id).schedule_id)
    assert sched.trials == TRIALS and 0 <= sched.max_abs_error < float("inf")
    # Independently of the worker's check: the served library, fresh inputs, the reference,
    # through the drop-in main and (for a packed best) pack_<i> + main_packed.
    params = op.Params.model_validate(raw)
    module = tvm.runtime.load_module(
        str(context.artifact_dir / store.schedules.get_artifact(sched.artifact_id).path)
    )
    func = spec.mod["main"]
    inputs, expected = op.make_case(params, func, np.random.default_rng(1234))
    out_shape, out_dtype = arg_specs(func)[-1]
    packed = [PackedParam(**p) for p in sched.packed_params or []]
    assert bool(packed) == (sched.space == "packed")
    # A bf16 micro-kernel has no drop-in main (tuning.search.bf16_dot): its packed entry only.
    drop_in = module.implements_function("main")
    assert drop_in or (packed and "tunehub_dpbf16ps" in sched.tir), "no drop-in main"
    for layout in ([], packed) if packed and drop_in else ([packed] if packed else [[]]):
        actual = run_module(module, "llvm", inputs, out_shape, out_dtype, layout)
        check_close(actual, expected, *op.tolerance(params))
