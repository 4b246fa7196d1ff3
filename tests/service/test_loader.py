"""`load_kernel` on schedules a real server serves: the suite's tuned tiny matmul (plain) and a
schedule of the packed space (a real MetaSchedule sample, split and compiled as the worker
publishes it). The kernels compute numpy's matmul, a bound weight is packed once, bad arguments
are refused by name, and in a fresh process TVM's pool runs on the target's cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.blobs import DirectoryBlobs
from schedules_db.values import NewSchedule
from service.client import TunehubClient
from service.client.loader import KernelInputError, load_kernel, machine_cpus
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import TINY, ServerThread
from tests.tuning.store_rows import host_and_workload
from tests.tuning.test_spaces import _packed_sample
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload
from tuning.hardware.host import current_tvm_series
from tuning.publish.packing import split_packed
from tuning.publish.verify import build_library

ROOT = Path(__file__).resolve().parents[2]
PACKED = {"M": 32, "N": 64, "K": 48}


@pytest.fixture(autouse=True)
def _keep_thread_setting() -> Iterator[None]:
    """A kernel loaded in this process sets TVM_NUM_THREADS (for pools started later and for
    child processes): restore what the suite had."""
    before = os.environ.get("TVM_NUM_THREADS")
    yield
    if before is None:
        os.environ.pop("TVM_NUM_THREADS", None)
    else:
        os.environ["TVM_NUM_THREADS"] = before


@dataclass
class Served:
    client: TunehubClient
    plain: int  # schedule ids
    packed: int


def _publish(store: Store, spec, tir: str, library: Path, artifacts: Path, packed: list) -> int:  # noqa: ANN001
    """Publish ``library`` as the best of ``spec`` on the host target; its schedule id."""
    target_id, workload_id = host_and_workload(store, spec)
    job = store.jobs.create(workload_id, target_id, 8, "q")
    assert store.jobs.claim(job.id, "w", timedelta(seconds=60))
    stored = DirectoryBlobs(artifacts).put(library, ".so")
    schedule = NewSchedule(
        None, 1.0, 2.0, 0.0, tir, stored.sha256, stored.size, stored.path,
        tvm_series=current_tvm_series(), space="packed" if packed else "plain",
        packed_params=[p.as_json() for p in packed],
    )  # fmt: skip
    schedule_id = store.schedules.publish(job.id, "w", schedule)
    assert schedule_id is not None
    return int(schedule_id)


@pytest.fixture(scope="module")
def served(tuned_store: dict, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with two bests: the suite's tuned tiny matmul (its published TIR and library)
    and a packed-space schedule of a 32x64x48 matmul (pack_1 + main_packed + main)."""
    root = tmp_path_factory.mktemp("loader")
    url = f"sqlite:///{root / 'store.db'}"
    engine = make_engine(url)
    upgrade_schema(engine)
    store = Store(engine, tvm_series=current_tvm_series())
    tuned: Store = tuned_store["store"]
    best = tuned.schedules.get(tuned.jobs.get(tuned_store["job_id"]).schedule_id)
    library = tuned_store["artifact_dir"] / tuned.schedules.get_artifact(best.artifact_id).path
    spec = catalog_workload("matmul", get_operator("matmul").Params(**TINY))
    plain = _publish(store, spec, best.tir, library, root / "artifacts", [])
    _, packed_spec, target, sch = _packed_sample("matmul", PACKED, seed=3)
    split = split_packed(sch.mod)
    assert split.packed, "the packed sample packs no weight"
    built = build_library(split.mod, target, root / "packed.so")
    packed = _publish(
        store, packed_spec, split.mod.script(), built, root / "artifacts", split.packed
    )
    settings = Settings(data_dir=root, database_url=url)
    with (
        ServerThread(create_app(settings, run_reaper=False)) as server,
        TunehubClient(server.url) as client,
    ):
        yield Served(client, plain, packed)
    engine.dispose()


def _operands(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((m, k)).astype("float32"),
        rng.standard_normal((k, n)).astype("float32"),
    )


def _aligned(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    """A C-contiguous numpy array whose data starts on a 64-byte boundary."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(size + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + size].view(dtype).reshape(shape)


def test_a_plain_schedule_runs_main_and_computes_numpys_matmul(served: Served) -> None:
    a, b = _operands(32, 32, 32)
    kernel = load_kernel(served.plain, client=served.client)  # by id: fetched and downloaded
    assert kernel.entry == "main" and not kernel.packings
    assert [(p.name, p.shape) for p in kernel.inputs] == [("A", (32, 32)), ("B", (32, 32))]
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    kernel.bind("B", b)  # a plain constant is held (copied once) too
    assert [p.name for p in kernel.inputs] == ["A"]
    np.testing.assert_allclose(kernel(a), a @ b, rtol=1e-4, atol=1e-4)
    out = _aligned((32, 32))
    assert kernel(a, out=out) is out  # written in place, no copy
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    # Every call returns its own output, whether the input was copied (staged) or shared.
    shared = _aligned((32, 32))
    shared[:] = 2 * a
    first, second = kernel(a), kernel(shared)
    assert isinstance(first, np.ndarray) and first.dtype == np.float32
    np.testing.assert_allclose(first, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second, 2 * a @ b, rtol=1e-4, atol=1e-4)


def test_a_packed_schedule_packs_the_weight_once(served: Served, tmp_path: Path) -> None:
    a, b = _operands(PACKED["M"], PACKED["N"], PACKED["K"])
    schedule = served.client.schedule(served.packed)
    library = tmp_path / "kernel.so"
    served.client.download_artifact(served.packed, library)
    weight = b.copy()
    kernel = load_kernel(schedule, library, constants={1: weight})
    (param,) = schedule["packed_params"]
    assert kernel.entry == "main_packed" and [p.name for p in kernel.inputs] == ["A"]
    packed = kernel.constants[1]
    assert list(packed.shape) == param["packed_shape"] != list(b.shape)
    np.testing.assert_allclose(kernel(a), a @ b, rtol=1e-4, atol=1e-4)
    # Packed once, at bind: the kernel holds the same packed tensor and never reads the
    # caller's weight again (zeroing it changes nothing).
    weight[:] = 0
    np.testing.assert_allclose(kernel(a), a @ b, rtol=1e-4, atol=1e-4)
    assert kernel.constants[1].same_as(packed)
    # Unbound, the weight is packed on every call, with a warning saying how to avoid it.
    per_call = load_kernel(schedule, library)
    with pytest.warns(RuntimeWarning, match=r"parameter 1 \(B\) is packed on every call"):
        np.testing.assert_allclose(per_call(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_bad_arguments_are_refused_by_name(served: Served, tmp_path: Path) -> None:
    a, b = _operands(PACKED["M"], PACKED["N"], PACKED["K"])
    schedule = served.client.schedule(served.packed)
    kernel = load_kernel(schedule, client=served.client)
    with pytest.raises(KernelInputError, match=r"parameter 1 \(B\) is float32\[64, 48\], expected"):
        kernel.bind(1, b.T.copy())
    with pytest.raises(
        ValueError, match=r"parameter 1 \(B\) is float32\[64, 48\], expected float32\[48, 64\]"
    ):
        load_kernel(schedule, client=served.client, constants={"B": b.T.copy()})
    with pytest.raises(KernelInputError, match=r"parameter 0 \(A\) is float64\[32, 48\]"):
        kernel(a.astype("float64"), b)
    with pytest.raises(KernelInputError, match=r"takes 2 input\(s\) \(A, B\), got 1"):
        kernel(a)
    with pytest.raises(KernelInputError, match="no input parameter 'W'"):
        kernel.bind("W", b)
    with pytest.raises(KernelInputError, match="out= must be"):
        kernel(a, b, out=np.empty((64, 32), "float32").T)  # strided: no place to write into
    other = tmp_path / "other.so"
    served.client.download_artifact(served.plain, other)
    with pytest.raises(ValueError, match="library: .* is not schedule"):
        load_kernel(schedule, other)
    with pytest.raises(ValueError, match="threads: a thread count must be a positive integer"):
        load_kernel(schedule, client=served.client, threads=0)
    with pytest.raises(ValueError, match="no target"):
        load_kernel({k: v for k, v in schedule.items() if k != "target"})
    with pytest.raises(TypeError, match="schedule: a schedule id or its JSON"):
        load_kernel("7")


FRESH = """
import json, sys, threading, warnings
import tvm
from service.client.loader import load_kernel

schedule = json.loads(open(sys.argv[1]).read())
threads = json.loads(sys.argv[3])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = load_kernel(schedule, sys.argv[2], threads=threads)
    seen = [tvm.runtime.num_threads()]

def _pool():
    import numpy as np
    kernel(np.ones((32, 48), "float32"), np.ones((48, 64), "float32"))
    return tvm.runtime.num_threads()
other = threading.Thread(target=lambda: seen.append(_pool()))
other.start()
other.join()
print(json.dumps({"threads": seen, "warnings": [str(w.message) for w in caught]}))
"""


def _fresh(code: str, schedule: dict, library: Path, threads: int | None, env: dict) -> dict:
    """Run ``code`` in a fresh interpreter; its last line of output as JSON."""
    path = library.with_suffix(".json")
    path.write_text(json.dumps(schedule))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(path), str(library), json.dumps(threads)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def fresh_env() -> dict:
    """This environment without a thread setting: TVM's own default applies."""
    assert machine_cpus() >= 2, "the thread tests need a machine with at least 2 CPUs"
    return {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}


def test_a_fresh_process_runs_on_the_targets_cores(
    served: Served, tmp_path: Path, fresh_env: dict
) -> None:
    schedule = served.client.schedule(served.packed)
    library = tmp_path / "kernel.so"
    served.client.download_artifact(served.packed, library)
    cores = schedule["target"]["canonical"]["num-cores"]
    expected = min(cores, machine_cpus())
    # The loading thread and a thread that only calls the kernel both run on the target's cores
    # (TVM alone would give this x86 VM half its CPUs).
    got = _fresh(FRESH, schedule, library, None, fresh_env)
    assert got == {"threads": [expected, expected], "warnings": []}
    # What the target says is what runs: a one-core target, and an explicit override.
    one_core = json.loads(json.dumps(schedule))
    one_core["target"]["canonical"]["num-cores"] = 1
    assert _fresh(FRESH, one_core, library, None, fresh_env)["threads"] == [1, 1]
    assert _fresh(FRESH, schedule, library, 2, fresh_env)["threads"] == [2, 2]


def test_a_pool_started_too_small_is_reported(
    served: Served, tmp_path: Path, fresh_env: dict
) -> None:
    schedule = served.client.schedule(served.packed)
    library = tmp_path / "kernel.so"
    served.client.download_artifact(served.packed, library)
    # TVM code that ran first started this thread's pool on one thread; it cannot grow.
    started_first = FRESH.replace("import tvm\n", "import tvm\ntvm.runtime.num_threads()\n", 1)
    got = _fresh(started_first, schedule, library, 2, {**fresh_env, "TVM_NUM_THREADS": "1"})
    assert got["threads"] == [1, 2]  # a new thread's pool starts with the kernel's count
    (warning,) = got["warnings"]
    assert "measured on 2 threads but runs on 1" in warning
    assert "cannot grow a started pool" in warning and "TVM_NUM_THREADS=2" in warning
