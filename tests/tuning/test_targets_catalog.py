"""Targets and the catalog's parameter schemas (no tuning)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from tuning.catalog import get_operator, list_operators
from tuning.catalog.workload import catalog_workload
from tuning.hardware.targets import TargetError, resolve_target
from tuning.publish.verify import VerificationError, check_close


def test_host_target_has_the_real_cpu_and_cores() -> None:
    from tvm.target.codegen import llvm_get_system_cpu

    host = resolve_target("host")
    assert host.kind == "llvm"
    assert host.canonical["mcpu"] == llvm_get_system_cpu() != ""
    assert host.canonical["num-cores"] >= 1
    assert host.label.startswith(host.canonical["mcpu"])
    assert host.label.endswith(f"-{host.canonical['num-cores']}c")


ZEN4_FLAGS_WITHOUT_AVX512 = {  # a Zen 4 VM whose hypervisor hides AVX-512 and GFNI
    "sse",
    "sse2",
    "sse3",
    "ssse3",
    "sse41",
    "sse42",
    "sse4a",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "vaes",
    "vpclmulqdq",
}


def test_vector_features_the_cpu_lacks_are_switched_off() -> None:
    from tuning.hardware.host import missing_vector_features

    znver4 = {"kind": "llvm", "mcpu": "znver4"}
    assert missing_vector_features(znver4, ZEN4_FLAGS_WITHOUT_AVX512) == ["avx512f", "gfni"]
    full = ZEN4_FLAGS_WITHOUT_AVX512 | {
        "gfni",
        "avx512f",
        "avx512bw",
        "avx512cd",
        "avx512dq",
        "avx512vl",
        "avx512bf16",
        "avx512bitalg",
        "avx512ifma",
        "avx512vbmi",
        "avx512vbmi2",
        "avx512vnni",
        "avx512vpopcntdq",
    }
    assert missing_vector_features(znver4, full) == []
    assert missing_vector_features(znver4, None) == []
    label = resolve_target(dict(znver4, mattr=["-avx512f", "-gfni"], **{"num-cores": 2})).label
    assert label == "znver4-no-avx512f-no-gfni-2c"


def test_host_target_implies_only_what_this_cpu_has_and_its_code_runs() -> None:
    """Code vectorised for the host target runs here (LLVM's mcpu alone would emit AVX-512 on
    a Zen 4 VM without it, and the process would die with SIGILL)."""
    import subprocess
    import sys

    from tuning.hardware.host import cpu_flags, missing_vector_features

    host = resolve_target("host")
    # Every vector feature the host target implies is in /proc/cpuinfo: nothing left to switch off.
    assert missing_vector_features(host.canonical, cpu_flags()) == []
    script = f"""
import numpy as np, tvm
from tvm import te
import tvm.s_tir as s_tir
a = te.placeholder((4096,), "float32", name="a")
b = te.compute((4096,), lambda i: a[i] * 2.0 + 1.0, name="b")
sch = s_tir.Schedule(tvm.IRModule({{"main": te.create_prim_func([a, b])}}))
outer, inner = sch.split(sch.get_loops(sch.get_sblock("b"))[0], [None, 64])
sch.vectorize(inner)
lib = tvm.compile(sch.mod, target=tvm.target.Target({host.canonical!r}))
x = tvm.runtime.tensor(np.arange(4096, dtype="float32"))
y = tvm.runtime.tensor(np.zeros(4096, dtype="float32"))
lib["main"](x, y)
assert np.allclose(y.numpy(), np.arange(4096) * 2 + 1)
"""
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])


def test_equal_targets_are_canonically_equal() -> None:
    a = resolve_target({"kind": "llvm", "mcpu": "znver4", "num-cores": 2})
    b = resolve_target('{"num-cores": 2, "mcpu": "znver4", "kind": "llvm"}')
    c = resolve_target({"kind": "llvm", "mcpu": "znver4", "num-cores": 4})
    assert a == b != c


@pytest.mark.parametrize(
    "spec, reason",
    [
        ("llvm -mcpu=znver4", "JSON"),
        ({"kind": "quantum"}, "quantum"),
        ({"kind": "llvm", "no-such-option": 1}, "no-such-option"),
        ({"mcpu": "znver4"}, "kind"),
        ([1, 2], "kind"),
    ],
)
def test_bad_targets_are_rejected_with_a_reason(spec: object, reason: str) -> None:
    with pytest.raises(TargetError, match=reason):
        resolve_target(spec)  # type: ignore[arg-type]


def _system_triple() -> str:
    from tvm.target.codegen import llvm_get_system_triple

    return str(llvm_get_system_triple())


REFUSED_TARGETS = [  # (spec, loc of the attribute at fault, words of the reason)
    ({"kind": "c"}, ("kind",), "not one tunehub tunes"),
    ({"kind": "ext_dev"}, ("kind",), "not one tunehub tunes"),
    ({"kind": "hexagon"}, ("kind",), "not one tunehub tunes"),
    ({"kind": "quantum"}, ("kind",), "quantum"),
    ({"kind": "llvm", "mcpu": "notacpu"}, ("mcpu",), "not a CPU LLVM"),
    ({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "znver4"}, ("mcpu",), "aarch64"),
    ({"kind": "llvm", "mcpu": "znver4\u0000"}, ("mcpu",), "must be a name"),
    ({"kind": "llvm", "mattr": ["+nonexistentfeature"]}, ("mattr", 0), "no feature"),
    ({"kind": "llvm", "mattr": ["+avx2", "-sse41"]}, ("mattr", 1), "no feature 'sse41'"),
    ({"kind": "llvm", "mattr": ["avx2"]}, ("mattr", 0), "'\\+feature'"),
    ({"kind": "llvm", "mattr": "+avx2"}, ("mattr",), "list"),
    ({"kind": "llvm", "mtriple": "foo-bar-baz"}, ("mtriple",), "not a triple"),
    ({"kind": "llvm", "mtriple": "nvptx64-nvidia-cuda"}, ("mtriple",), "CPU code"),
    ({"kind": "llvm", "num-cores": -5}, ("num-cores",), "at least 1"),
    ({"kind": "llvm", "num-cores": 0}, ("num-cores",), "at least 1"),
    ({"kind": "llvm", "num-cores": 10**6}, ("num-cores",), "at most"),
    ({"kind": "llvm", "opt-level": 7}, ("opt-level",), "opt-level"),
    ({"kind": "llvm", "cl-opt": ["-print-after-all"]}, ("cl-opt",), "process-wide"),
    ({"kind": "cuda", "arch": "sm_9999"}, ("arch",), "not a CUDA arch"),
    ({"kind": "cuda", "arch": "sm_35"}, ("arch",), "sm_50 and newer"),
    ({"kind": "cuda", "arch": "compute_80"}, ("arch",), "not a CUDA arch"),
    ({"kind": "cuda"}, ("arch",), "names its arch"),
    ({"kind": "cuda", "from_device": 0}, ("from_device",), "name the arch"),
    ({"kind": "cuda", "arch": "sm_80", "max_num_threads": 0}, ("max_num_threads",), "at least"),
    (
        {"kind": "cuda", "arch": "sm_80", "host": {"kind": "llvm", "mcpu": "notacpu"}},
        ("host", "mcpu"),
        "not a CPU",
    ),
    ({"kind": "cuda", "arch": "sm_80", "host": {"kind": "c"}}, ("host",), "llvm target"),
]


@pytest.mark.parametrize("spec, loc, reason", REFUSED_TARGETS)
def test_targets_tvm_accepts_but_tunehub_cannot_serve_are_refused(
    spec: dict, loc: tuple, reason: str
) -> None:
    """TVM 0.27 builds every one of these targets; none of them names hardware a worker could
    tune for and serve (the issue: jobs queued for them waited forever)."""
    with pytest.raises(TargetError, match=reason) as info:
        resolve_target(spec)
    assert info.value.loc == loc


def test_targets_of_known_names_are_accepted_without_the_hardware() -> None:
    """Names are checked, not the machine: a cuda target resolves on this GPU-less host, an
    aarch64 one on x86, and the host's own target (with any features it switches off) too."""
    from tuning.hardware.targets import cuda_archs

    assert resolve_target({"kind": "llvm", "mcpu": "znver4", "num-cores": 2}).label == "znver4-2c"
    assert resolve_target({"kind": "cuda", "arch": "sm_80"}).label == "cuda-sm_80"
    assert resolve_target({"kind": "cuda", "arch": "sm_90a"}).canonical["arch"] == "sm_90a"
    assert {"sm_50", "sm_80", "sm_90a", "sm_120"} <= set(cuda_archs())
    assert "sm_35" not in cuda_archs() and cuda_archs()[0] == "sm_50"
    arm = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "neoverse-v1", "mattr": ["+sve"]}
    assert resolve_target(arm).canonical["mtriple"] == "aarch64-linux-gnu"
    explicit = {"kind": "llvm", "mtriple": _system_triple(), "mattr": ["+avx2", "-avx512f"]}
    assert resolve_target(explicit).canonical["mattr"] == ["+avx2", "-avx512f"]
    host = resolve_target("host")
    assert resolve_target(host.canonical) == host  # a stored canonical resolves again
    zen4_vm = {"kind": "llvm", "mcpu": "znver4", "mattr": ["-avx512f", "-gfni"], "num-cores": 2}
    assert resolve_target(zen4_vm).label == "znver4-no-avx512f-no-gfni-2c"


@pytest.mark.parametrize(
    "params, field, kind",
    [
        ({"M": 0, "N": 4, "K": 4}, "M", "greater_than_equal"),
        ({"M": -3, "N": 4, "K": 4}, "M", "greater_than_equal"),
        ({"M": 4, "N": 2.5, "K": 4}, "N", "int_type"),
        ({"M": 4, "N": "8", "K": 4}, "N", "int_type"),
        ({"M": 4, "N": 4, "K": 10**6}, "K", "less_than_equal"),
        ({"M": 4, "N": 4}, "K", "missing"),
        ({"M": 4, "N": 4, "K": 4, "Q": 1}, "Q", "extra_forbidden"),
        ({"M": 4, "N": 4, "K": 4, "dtype": "int3"}, "dtype", "literal_error"),
    ],
)
def test_matmul_params_are_checked(params: dict, field: str, kind: str) -> None:
    with pytest.raises(ValidationError) as info:
        get_operator("matmul").Params.model_validate(params)
    errors = info.value.errors()
    assert any(e["loc"] == (field,) and e["type"] == kind for e in errors), errors


def test_matmul_rejects_absurd_total_size() -> None:
    with pytest.raises(ValidationError, match="exceeds the limit"):
        get_operator("matmul").Params.model_validate({"M": 8192, "N": 8192, "K": 8192})


def test_every_operator_has_a_schema_example_and_a_correct_reference() -> None:
    for op in list_operators():
        params = op.Params.model_validate(op.example)
        assert op.schema()["properties"]
        assert op.flop(params) > 0
    op = get_operator("matmul")
    params = op.Params(M=3, N=5, K=4)
    spec = catalog_workload("matmul", params)
    rng = np.random.default_rng(1)
    a, b = op.make_inputs(params, spec.mod["main"], rng)
    assert a.shape == (3, 4) and b.shape == (4, 5) and a.dtype == np.float32
    np.testing.assert_allclose(op.reference(params, [a, b]), a.astype(float) @ b, rtol=1e-12)
    # Same operator and params -> same workload identity; other params -> another.
    assert catalog_workload("matmul", params).shash == spec.shash
    assert catalog_workload("matmul", op.Params(M=3, N=5, K=5)).shash != spec.shash


def test_check_close_rejects_a_wrong_kernel() -> None:
    expected = np.ones((4, 4))
    assert check_close(expected + 1e-7, expected, 1e-4, 1e-5) == pytest.approx(1e-7)
    with pytest.raises(VerificationError, match="max \\|error\\|"):
        check_close(expected + 0.5, expected, 1e-4, 1e-5)
    with pytest.raises(VerificationError):
        check_close(np.full((4, 4), np.nan), expected, 1e-4, 1e-5)
    with pytest.raises(VerificationError):
        check_close(np.ones((4, 5)), expected, 1e-4, 1e-5)
