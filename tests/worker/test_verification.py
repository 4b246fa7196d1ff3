"""Verification of user functions (raw TIR, a model's tasks): the reference is the function as
written, run by TVM (in a jailed kernel runner, as the worker runs it), and the tolerance
grows with the terms a reduction sums, as the catalog's contractions' do, so that a correct
schedule that only sums in another order is not refused."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import te

from schedules_db.values import Workload
from service.worker.verification import Reference
from tuning.ir import normalize, reduction_length
from tuning.measure.devices import Measurer
from tuning.publish.verify import VerificationError, build_library

K = 4608  # ResNet-18's last 3x3 convolutions sum 512 x 3 x 3 terms per output


def _dot(n: int, summed: int | None = None) -> tvm.IRModule:
    """Y[i] = sum_k A[i, k] * B[k] over the first ``summed`` (default all ``n``) terms: a user
    function (no catalog operator); with fewer terms, a wrong kernel of the same signature."""
    a = te.placeholder((64, n), "float32", name="A")
    b = te.placeholder((n,), "float32", name="B")
    k = te.reduce_axis((0, summed or n), name="k")
    y = te.compute((64,), lambda i: te.sum(a[i, k] * b[k], axis=k), name="Y")
    return normalize(te.create_prim_func([a, b, y]))


def _workload(mod: tvm.IRModule) -> Workload:
    return Workload(
        1, "0", "user", None, {}, 0.0, None, datetime.now(timezone.utc), None,
        tvm.ir.save_json(mod),
    )  # fmt: skip


def test_reduction_length_is_the_terms_summed_per_output() -> None:
    assert reduction_length(_dot(K)["main"]) == K
    x = te.placeholder((8,), "float32", name="X")
    relu = te.compute((8,), lambda i: te.max(x[i], 0.0), name="R")
    assert reduction_length(te.create_prim_func([x, relu])) == 1


def test_a_schedule_summing_in_another_order_passes_and_a_wrong_one_fails(
    tmp_path: Path,
) -> None:
    """The candidate sums K terms in 64 interleaved partial sums (rfactor): its rounding
    differs from the reference's by more than a fixed 1e-5, and it is accepted; the same
    candidate with its last 64 terms dropped is refused."""
    mod = _dot(K)
    target = tvm.target.Target("llvm")
    with Measurer("llvm", work_dir=tmp_path) as measurer, measurer.session() as session:
        untuned = session.load(build_library(mod, target, tmp_path / "u.so"))
        reference = Reference(_workload(mod), session, untuned, mod["main"])
        assert reference.atol == pytest.approx(1e-5 + 2e-7 * K)

        def candidate(extent: int, name: str) -> float:
            changed = _dot(K, extent)
            sch = tvm.s_tir.Schedule(changed)
            block = sch.get_sblock("Y")
            _, k = sch.get_loops(block)
            _, inner = sch.split(k, [None, 64])
            sch.rfactor(inner, 0)
            return reference.check(session.load(build_library(sch.mod, target, tmp_path / name)))

        error = candidate(K, "reordered.so")
        assert 1e-5 < error < reference.atol
        with pytest.raises(VerificationError):
            candidate(K - 64, "wrong.so")


def test_a_task_with_scalar_operands_is_verified(tmp_path: Path) -> None:
    """MobileNet-V2's ReLU6 comes from ONNX as Clip with its bounds as 0-d tensors, and Relax
    fuses them into the conv's task as 0-d parameters: the reference and the candidates run on
    0-d inputs (a runner handed them as 1-element vectors refused every such task)."""
    x = te.placeholder((4, 16), "float32", name="X")
    low, high = (
        te.placeholder((), "float32", name="low"),
        te.placeholder((), "float32", name="high"),
    )
    y = te.compute((4, 16), lambda i, j: te.min(te.max(x[i, j], low[()]), high[()]), name="Y")
    mod = normalize(te.create_prim_func([x, low, high, y]))
    target = tvm.target.Target("llvm")
    with Measurer("llvm", work_dir=tmp_path) as measurer, measurer.session() as session:
        untuned = session.load(build_library(mod, target, tmp_path / "u.so"))
        reference = Reference(_workload(mod), session, untuned, mod["main"])
        assert [a.shape for a in reference.inputs] == [(4, 16), (), ()]
        x_in, lo, hi = reference.inputs
        assert (reference.expected == np.clip(x_in, lo, hi)).all()
        sch = tvm.s_tir.Schedule(mod)
        sch.vectorize(sch.get_loops(sch.get_sblock("Y"))[-1])
        assert reference.check(session.load(build_library(sch.mod, target, tmp_path / "v.so"))) == 0
