"""The packed search space: weights in a layout the search chooses, register tiles one vector wide,
the pre-transform split out and carried by the artifact, everything checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.targets import resolve_target
from tuning.hardware.vectors import vector_bits
from tuning.measure.timing import run_module
from tuning.publish.packing import PACKED_ENTRY, split_packed
from tuning.search.spaces import (
    PACKED,
    PLAIN,
    SpaceError,
    resolve_space,
    space_generator,
    space_module,
)


def test_auto_is_packed_only_for_weights_on_a_cpu() -> None:
    assert resolve_space("auto", (1,), "llvm") == PACKED
    assert resolve_space("auto", (), "llvm") == PLAIN
    assert resolve_space("auto", (1,), "cuda") == PLAIN
    assert resolve_space("plain", (1,), "llvm") == PLAIN
    with pytest.raises(SpaceError, match="no constant operand"):
        resolve_space("packed", (), "llvm")
    with pytest.raises(SpaceError, match="CPU"):
        resolve_space("packed", (1,), "cuda")


def test_vector_width_follows_the_target() -> None:
    import tvm

    assert vector_bits(tvm.target.Target({"kind": "llvm", "mcpu": "znver4"})) == 512
    assert vector_bits(tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})) == 256
    assert vector_bits(tvm.target.Target({"kind": "llvm", "mcpu": "x86-64"})) == 128


def _packed_sample(operator: str, params: dict, seed: int):  # noqa: ANN202
    """One random schedule of the packed space (design space sampled, postprocessors applied),
    as the evolutionary search would produce it: no measurement needed."""
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext

    op = get_operator(operator)
    spec = catalog_workload(operator, op.Params(**params))
    target = tvm.target.Target(resolve_target("host").canonical)
    mod = space_module(spec.mod, PACKED, op.constant_operands)
    context = TuneContext(
        mod=mod,
        target=target,
        space_generator=space_generator(PACKED, target),
        search_strategy="replay-trace",
        rand_state=seed,
        num_threads=1,
    ).clone()
    context.pre_tuning(
        max_trials=4,
        num_trials_per_iter=4,
        design_spaces=context.generate_design_space(),
        database=None,
        cost_model=None,
    )
    candidates = context.search_strategy.generate_measure_candidates()
    context.post_tuning()
    assert candidates, "the packed space produced no valid candidate"
    return op, spec, target, candidates[0].sch


def _library_matches_numpy(op, spec, target, split, params: dict, tmp_path, seed: int):  # noqa: ANN001, ANN202
    """Compile ``split``, run it through ``main`` (the user's layouts) and through pack_1 then
    ``main_packed``, and check both against numpy; returns the loaded library and inputs."""
    import tvm

    path = tmp_path / "packed.so"
    tvm.compile(split.mod, target=target).export_library(str(path))
    module = tvm.runtime.load_module(str(path))
    p = op.Params(**params)
    inputs, expected = op.make_case(p, spec.mod["main"], np.random.default_rng(seed))
    rtol, atol = op.tolerance(p)
    out_shape = [int(x) for x in spec.mod["main"].params[-1].shape]
    for packed in ([], split.packed):
        actual = run_module(module, "llvm", inputs, out_shape, "float32", packed)
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    return module, inputs


@pytest.mark.parametrize(
    "operator,params",
    [
        ("matmul", {"M": 32, "N": 64, "K": 48}),
        ("conv2d", {"layout": "NHWC", "N": 1, "C": 16, "H": 8, "W": 8, "K": 32, "R": 3, "S": 3}),
    ],
)
def test_packed_schedule_splits_into_pack_and_kernel_that_match_numpy(
    operator: str, params: dict, tmp_path
) -> None:
    import tvm

    op, spec, target, sch = _packed_sample(operator, params, seed=3)
    # The weight really is read in a new layout inside the scheduled function ...
    assert "meta_schedule.layout_rewrite_preproc" in sch.mod.script()
    split = split_packed(sch.mod)
    assert [p.index for p in split.packed] == [1] and split.entry == PACKED_ENTRY
    param = split.packed[0]
    assert param.shape == [int(x) for x in spec.mod["main"].params[1].shape]
    assert param.packed_shape != param.shape
    assert int(np.prod(param.packed_shape)) >= int(np.prod(param.shape))
    # ... and the library carries the drop-in main, the kernel and the pre-transform.
    module, inputs = _library_matches_numpy(op, spec, target, split, params, tmp_path, seed=0)
    # The pack function is a pure permutation (plus zero padding) of the weight.
    dev = tvm.cpu(0)
    packed_w = tvm.runtime.empty(param.packed_shape, param.dtype, dev)
    module[param.function](tvm.runtime.tensor(inputs[1], dev), packed_w)
    values = packed_w.numpy().ravel()
    nonzero = np.sort(values[values != 0])
    np.testing.assert_array_equal(nonzero, np.sort(inputs[1].ravel()[inputs[1].ravel() != 0]))


def test_plain_schedule_is_left_alone(tuned_store: dict) -> None:
    from tuning.ir import load_mod
    from tuning.publish.verify import apply_trace

    store = tuned_store["store"]
    record = store.records.top_k(tuned_store["workload_id"], tuned_store["target_id"], 1)[0]
    assert record.space == PLAIN
    mod = load_mod(store.catalog.get_workload(tuned_store["workload_id"]).mod_json)
    split = split_packed(apply_trace(mod, record.trace_json))
    assert split.packed == [] and split.entry == "main"
    assert split.mod.script() == apply_trace(mod, record.trace_json).script()


def test_a_packed_job_publishes_a_verified_packed_kernel(tmp_path) -> None:
    """A real search in the packed space through the worker's job runner: its records say so,
    the best says which space won and which weights it packs, and the served library computes
    the matmul both through pack_1 + main_packed and through the drop-in main."""
    import tvm

    from schedules_db import Store, make_engine, upgrade_schema
    from service.worker.execution import WorkerContext, run_job
    from tests.tuning.store_rows import host_and_workload

    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade_schema(engine)
    store = Store(engine)
    op = get_operator("matmul")
    params = op.Params(M=64, N=64, K=64)
    spec = catalog_workload("matmul", params)
    target_id, workload_id = host_and_workload(store, spec)
    job = store.jobs.create(workload_id, target_id, 8, "tunehub.test", space=PACKED)
    context = WorkerContext(store, tmp_path / "artifacts", "pytest", num_trials_per_iter=4, seed=5)
    assert run_job(context, job.id) == "succeeded", store.jobs.get(job.id).error
    records = store.records.list_records(target_id, workload_id, job.id)
    assert len(records) == 8 and {r.space for r in records} == {PACKED}
    schedule = store.schedules.get(store.jobs.get(job.id).schedule_id)
    # 64^3 tuned and packed is far faster than the single-threaded plain loop nest.
    assert schedule.space == PACKED and schedule.latency_us < schedule.untuned_latency_us
    assert [p["index"] for p in schedule.packed_params] == [1]
    assert schedule.packed_params[0]["function"] == "pack_1"
    module = tvm.runtime.load_module(
        str(tmp_path / "artifacts" / store.schedules.get_artifact(schedule.artifact_id).path)
    )
    from tuning.publish.packing import PackedParam

    packed = [PackedParam(**p) for p in schedule.packed_params]
    inputs, expected = op.make_case(params, spec.mod["main"], np.random.default_rng(1))
    for layout in ([], packed):
        actual = run_module(module, "llvm", inputs, [64, 64], "float32", layout)
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)
    # A plain job for the same workload keeps its own budget: the packed records do not count.
    plain = store.jobs.create(workload_id, target_id, 8, "tunehub.test", space=PLAIN)
    assert plain.state == "queued"
    assert store.records.count(target_id, workload_id, space=PLAIN) == 0
    engine.dispose()


def _block_split(operator: str, params: dict):  # noqa: ANN202
    """`channel_split` of the operator's contraction block, in the packed space on AVX-512."""
    from tvm.s_tir.schedule import Schedule

    from tuning.search.channel_vectors import channel_split

    op = get_operator(operator)
    spec = catalog_workload(operator, op.Params(**params))
    mod = space_module(spec.mod, PACKED, op.constant_operands)
    sch = Schedule(mod)
    blocks = [sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))]
    (contraction,) = [b for b in blocks if b.init is not None]
    return channel_split(mod["main"], contraction, 512)


def test_only_nchw_like_contractions_get_the_channel_in_the_vector_lanes() -> None:
    conv = {"N": 1, "C": 16, "H": 8, "W": 8, "K": 32, "R": 3, "S": 3}
    nchw = _block_split("conv2d", {"layout": "NCHW", **conv})
    assert nchw is not None
    assert (nchw.axis, nchw.write_dim, nchw.lanes) == (1, 1, 16)  # K, in [N, K, OH, OW]
    # The weight-indexed axis is innermost already: matmul's N, NHWC's K.
    assert _block_split("matmul", {"M": 32, "N": 64, "K": 48}) is None
    assert _block_split("conv2d", {"layout": "NHWC", **conv}) is None
    # The activations depend on K too (groups), or K is not whole vectors.
    assert _block_split("conv2d", {"layout": "NCHW", **conv, "groups": 4}) is None
    assert _block_split("conv2d", {"layout": "NCHW", **conv, "K": 24}) is None


def test_nchw_conv_packed_schedule_vectorises_channels_and_matches_numpy(tmp_path) -> None:
    """An NCHW conv2d (+ bias + ReLU) from the packed space: its trace splits K into the
    vector lanes (and replays from the store's text form), and the kernel with its packed
    weight computes what numpy does."""
    import tvm
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.database import TuningRecord, Workload

    from tuning.publish.verify import apply_trace
    from tuning.traces import trace_to_text

    params = {"layout": "NCHW", "N": 1, "C": 16, "H": 8, "W": 6, "K": 32, "R": 3, "S": 3}
    params["padding"] = 1
    op, spec, target, sch = _packed_sample("conv2d_bias_relu", params, seed=5)
    trace = str(sch.trace)
    assert "transform_block_layout" in trace and "reverse_compute_at(block=b" in trace
    raw = _ffi_api.TuningRecordAsJSON(TuningRecord(sch.trace, Workload(sch.mod)))[0]
    mod = space_module(spec.mod, PACKED, op.constant_operands)
    replayed = apply_trace(mod, trace_to_text(raw))
    tvm.ir.assert_structural_equal(replayed, sch.mod)
    split = split_packed(sch.mod)
    _library_matches_numpy(op, spec, target, split, params, tmp_path, seed=1)


def test_a_1x1_nchw_conv_keeps_its_channel_lanes_innermost_and_vectorised(tmp_path) -> None:
    """A 1x1 kernel's ``ry``, ``rx`` (extent 1) used to end up inside the lanes loop, which the
    vectoriser then skipped (ResNet-18's 1x1 stride-2 convs ran at 11 GFLOPS instead of 112):
    the contraction's innermost loop is the vector's lanes, vectorised, and the kernel is right."""
    import re

    params = {"layout": "NCHW", "N": 1, "C": 32, "H": 8, "W": 8, "K": 32, "R": 1, "S": 1}
    params["stride"] = 2
    op, spec, target, sch = _packed_sample("conv2d_bias_relu", params, seed=5)
    text = sch.mod.script()
    lanes = vector_bits(target) // 32  # this host's float32 vector: 16 on AVX-512, 8 on AVX2
    vectorised = rf"in T\.vectorized\({lanes}\):\s*with T\.sblock\(\"conv2d_nchw_update\"\)"
    assert re.search(vectorised, text)
    _library_matches_numpy(op, spec, target, split_packed(sch.mod), params, tmp_path, seed=1)


def test_no_packed_loop_is_vectorised_wider_than_a_register(tmp_path) -> None:
    """A 7x7 NCHW conv's channel-blocked write-back was fused by the vectorising postprocessor
    into one 49-lane loop indexed by // 7 and % 7, which LLVM took 43 s to compile (ResNet-18's
    last stage): loops the postprocessor vectorises stop at one register, and the kernel
    builds in seconds and is right."""
    import re
    import time

    import tvm

    params = {"layout": "NCHW", "N": 1, "C": 16, "H": 7, "W": 7, "K": 32, "R": 3, "S": 3}
    params["padding"] = 1
    for seed in (3, 5):
        op, spec, target, sch = _packed_sample("conv2d_bias_relu", params, seed=seed)
        lanes = vector_bits(target) // 32
        text = sch.mod.script()
        widths = [int(w) for w in re.findall(r"T\.vectorized\((?:T\.int64\()?(\d+)", text)]
        assert widths and max(widths) <= lanes, widths
        started = time.monotonic()
        split = split_packed(sch.mod)
        tvm.compile(split.mod, target=target)
        assert time.monotonic() - started < 20
        folder = tmp_path / str(seed)  # one library path per seed: dlopen caches by path
        folder.mkdir()
        _library_matches_numpy(op, spec, target, split, params, folder, seed=1)


def test_a_model_tasks_int64_packing_splits_into_pack_and_kernel(tmp_path) -> None:
    """A packed-space trace of a model task (the tiny CNN's second conv with its bias and relu
    fused, as Relax's AttachAttrLayoutFreeBuffers marks it; Relax indexes with int64) splits
    into pack functions and ``main_packed`` like a catalog operator's: its published latency is
    the kernel on packed weights, as the compiled model runs it (the pack was once built over
    int32 loops, failed to parse the int64 index map, and the task's main packed inside every
    call: BERT's dense tasks published 3.0 ms for a 1.9 ms kernel). Through the pack and
    ``main_packed`` it computes what the function as written computes."""
    import json
    from pathlib import Path

    import tvm

    from tuning.ir import arg_specs, load_mod
    from tuning.publish.verify import apply_trace, compile_to_library

    case = json.loads((Path(__file__).parents[1] / "data" / "model_task_packing.json").read_text())
    mod = load_mod(case["mod_json"])
    scheduled = apply_trace(mod, case["trace_json"])
    split = split_packed(scheduled)
    assert split.packed and split.entry == "main_packed"
    assert all(p.packed_shape != p.shape for p in split.packed if p.name.startswith("param"))
    target = tvm.target.Target({"kind": "llvm"})
    specs = arg_specs(mod["main"])
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(dtype) for shape, dtype in specs[:-1]]
    out_shape, out_dtype = specs[-1]
    tuned = compile_to_library(split.mod, target, tmp_path / "tuned.so")
    plain = compile_to_library(mod, target, tmp_path / "plain.so")
    expected = run_module(plain, "llvm", inputs, out_shape, out_dtype)
    for packed in ([], split.packed):  # the drop-in main, and pack + main_packed
        actual = run_module(tuned, "llvm", inputs, out_shape, out_dtype, packed)
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
