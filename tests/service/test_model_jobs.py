"""Whole-model jobs over the real API and a real worker (in process): a tiny ONNX CNN is parsed
in the jail, its tasks stored and tuned by ordinary jobs (weights in the packed space), the
model compiled with the verified schedules, downloaded, run, and equal to onnxruntime's output;
the same model again is all cache hits; cancel, a compile whose worker died, and hostile
uploads behave."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from schedules_db import Store, make_engine
from service.app.usecases.create_model import split_budget
from service.client import TunehubClient
from service.client.relax_build import build
from service.client.tvm_database import TunehubDatabase
from service.entry.app import create_app
from service.shared.settings import Settings
from service.worker.execution import WorkerContext, run_next
from tests.conftest import ServerThread
from tests.service.rows import row_counts
from tests.tuning.model_cases import (
    TINY_RELAX,
    external_data,
    huge_initializer,
    relax_calling,
    resnet18_like,
    tiny_cnn,
)
from tuning.hardware.host import current_tvm_series
from tuning.hardware.targets import resolve_target
from tuning.models.pipeline import compile_with, tuning_pipeline

INPUT = [{"name": "x", "shape": [1, 3, 16, 16], "dtype": "float32"}]


@dataclass
class Service:
    client: httpx.Client
    data_dir: Path
    store: Store
    url: str

    def worker(self, name: str = "pytest-models") -> WorkerContext:
        target_ids = tuple(t.id for t in self.store.catalog.list_targets())
        return WorkerContext(
            store=self.store,
            artifact_dir=self.data_dir / "artifacts",
            worker_name=name,
            stale_after=timedelta(seconds=60),
            num_trials_per_iter=4,
            seed=0,
            target_ids=target_ids,
        )

    def run_worker(self, name: str = "pytest-models") -> list[str]:
        """Run the worker until nothing is left to do; the outcome of each job."""
        context, outcomes = self.worker(name), []
        while (outcome := run_next(context)) != "idle":
            outcomes.append(outcome)
        return outcomes


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    data_dir = tmp_path_factory.mktemp("models")
    # No parse-time quota: one identity parses model after model here (a busy host's parses
    # would run it into debt).
    app = create_app(Settings(data_dir=data_dir, parse_seconds_per_minute=0), run_reaper=False)
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=300) as client:
        store = Store(make_engine(f"sqlite:///{data_dir / 'tunehub.db'}"), current_tvm_series())
        yield Service(client, data_dir, store, server.url)


def _body(model: Any, trials: int = 8, **extra: Any) -> dict[str, Any]:
    source = base64.b64encode(model.SerializeToString()).decode()
    return {"name": "tiny", "format": "onnx", "source": source, "inputs": INPUT,
            "trials": trials, **extra}  # fmt: skip


def _onnx_output(model: Any, x: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString())
    return np.asarray(session.run(None, {"x": x})[0])


def _run_compiled(path: Path, x: np.ndarray) -> np.ndarray:
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.runtime.load_module(str(path)), tvm.cpu())
    return np.asarray(vm["main"](tvm.runtime.tensor(x)).numpy())


@dataclass
class TunedCnn:
    """The tiny CNN's first submission (``created``: the 201's body) and what the worker's run
    over its task jobs gave (``outcomes``)."""

    created: dict[str, Any]
    outcomes: list[str]


@pytest.fixture(scope="module")
def tuned_cnn(service: Service) -> TunedCnn:
    """The tiny CNN submitted once and every job run: the tests that need its tasks tuned take
    this, in whatever order they run (the first taker submits it; no other test does)."""
    created = service.client.post("/api/v1/models", json=_body(tiny_cnn()))
    assert created.status_code == 201, created.text
    return TunedCnn(created.json(), service.run_worker())


def test_a_model_is_tuned_compiled_and_equals_onnxruntime(
    service: Service, tuned_cnn: TunedCnn, tmp_path: Path
) -> None:
    model = tiny_cnn()
    body = tuned_cnn.created
    assert body["state"] == "tuning" and body["format"] == "onnx"
    tasks = body["tasks"]
    assert len(tasks) == body["progress"]["tasks"] >= 3
    # Every task is measured in the first round; the rest waits for the measured gaps.
    assert sum(t["trials"] for t in tasks) + body["progress"]["reserve_trials"] == 8
    names = {t["name"] for t in tasks}
    assert any(n.startswith("fused_conv2d") for n in names), names
    # Tasks with weights are searched in the packed space, the others in the plain one.
    spaces = {t["name"]: t["job"]["space"] for t in tasks}
    assert all(spaces[n] == "packed" for n in names if n.startswith("fused_conv2d")), spaces
    # Each task is a stored user workload with its job.
    for task in tasks:
        workload = service.client.get(f"/api/v1/workloads/{task['workload_id']}").json()
        assert workload["operator"] is None and workload["params"] == {"task": task["name"]}

    outcomes = tuned_cnn.outcomes
    assert outcomes and set(outcomes) == {"succeeded"}, outcomes
    done = service.client.get(f"/api/v1/models/{body['id']}").json()
    assert done["state"] == "succeeded", done
    assert {t["job"]["state"] for t in done["tasks"]} == {"succeeded"}
    result = done["result"]
    assert result["tasks_applied"] >= 1 and result["tuned_ms"] > 0 and result["untuned_ms"] > 0

    compiled = tmp_path / "model.so"
    response = service.client.get(f"/api/v1/models/{body['id']}/artifact")
    assert response.status_code == 200
    compiled.write_bytes(response.content)
    assert response.headers["x-content-sha256"] == result["artifact_sha256"]
    etag = response.headers["etag"]
    again = service.client.get(
        f"/api/v1/models/{body['id']}/artifact", headers={"If-None-Match": etag}
    )
    assert again.status_code == 304
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype("float32")
    np.testing.assert_allclose(_run_compiled(compiled, x), _onnx_output(model, x), rtol=1e-4,
                               atol=1e-5)  # fmt: skip

    # The same model again: every task is a cache hit and only the compile runs.
    second = service.client.post("/api/v1/models", json=_body(model)).json()
    assert second["progress"]["tasks_cache_hit"] == second["progress"]["tasks"]
    assert service.run_worker() == []  # no job ran: the compile is not a job
    assert service.client.get(f"/api/v1/models/{second['id']}").json()["state"] == "succeeded"


def _counting_client(url: str) -> tuple[TunehubClient, list[str]]:
    """A light client that remembers every request it sends."""
    client, sent = TunehubClient(url), []
    client.http.event_hooks["request"].append(lambda r: sent.append(f"{r.method} {r.url.path}"))
    return client, sent


def test_a_build_applies_the_tuned_tasks_with_two_requests(
    service: Service, tuned_cnn: TunedCnn
) -> None:
    """`build` runs the model jobs' pipeline on the user's own module, asks for every task in
    one lookup (plus the target's key), and compiles with the tuned schedules applied: the
    output equals the untuned build's and onnxruntime's."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    model = tiny_cnn()
    mod = from_onnx(model, shape_dict={"x": INPUT[0]["shape"]})
    target = tvm.target.Target(resolve_target("host").canonical)
    client, sent = _counting_client(service.url)
    with client:
        executable = build(mod, target, client=client)
        assert len(sent) == 2, sent  # the target's key, then one lookup of every task
        assert sent[1] == "POST /api/v1/lookup"
        # The tuned tasks are the ones applied: their functions come out scheduled.
        fused = tuning_pipeline(mod, target)
        database = TunehubDatabase(client, target)
        tuned = database.prefetch(fused)
        assert tuned >= 1
        with target, database, tvm.transform.PassContext(opt_level=3):
            applied = relax.transform.MetaScheduleApplyDatabase()(fused)
        scheduled = [
            gv.name_hint
            for gv, func in applied.functions_items()
            if isinstance(func, tvm.tirx.PrimFunc) and func.attrs
            and func.attrs.get("tirx.is_scheduled", False)
        ]  # fmt: skip
        assert len(scheduled) == tuned, scheduled
    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype("float32")
    vm = relax.VirtualMachine(executable, tvm.cpu())
    untuned = relax.VirtualMachine(
        compile_with(fused, target, ms.database.MemoryDatabase()), tvm.cpu()
    )
    tuned_out = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(tuned_out, untuned["main"](tvm.runtime.tensor(x)).numpy(),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
    np.testing.assert_allclose(tuned_out, _onnx_output(model, x), rtol=1e-4, atol=1e-5)


def test_a_bigger_model_is_looked_up_in_one_request_too(service: Service) -> None:
    """A ResNet-18-shaped CNN (20 tasks, none tuned): still the target's key and one lookup,
    and MetaSchedule's ~3 queries per function afterwards send nothing."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(resnet18_like(size=32), shape_dict={"x": [1, 3, 32, 32]})
    target = tvm.target.Target(resolve_target("host").canonical)
    fused = tuning_pipeline(mod, target)
    functions = [f for _, f in fused.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert len(functions) >= 13
    client, sent = _counting_client(service.url)
    with client:
        database = TunehubDatabase(client, target)
        assert database.prefetch(fused) == 0
        with target, database, tvm.transform.PassContext(opt_level=3):
            relax.transform.MetaScheduleApplyDatabase()(fused)
    assert len(sent) == 2, sent


def test_cancel_mid_model_cancels_its_task_jobs(service: Service) -> None:
    body = {"name": "relax-mlp", "format": "relax", "source": TINY_RELAX, "trials": 4,
            "inputs": [{"name": "x", "shape": [4, 16], "dtype": "float32"},
                       {"name": "w", "shape": [16, 8], "dtype": "float32"}]}  # fmt: skip
    response = service.client.post("/api/v1/models", json=body)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["state"] == "tuning" and created["progress"]["tasks"] >= 1
    cancelled = service.client.post(f"/api/v1/models/{created['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    body = service.client.get(f"/api/v1/models/{created['id']}").json()
    assert body["state"] == "cancelled"
    assert {t["job"]["state"] for t in body["tasks"]} == {"cancelled"}
    service.run_worker()  # a worker finds nothing of this model's to run
    after = service.client.get(f"/api/v1/models/{created['id']}").json()
    assert {(t["job"]["state"], t["job"]["trials_done"]) for t in after["tasks"]} == {
        ("cancelled", 0)
    }
    artifact = service.client.get(f"/api/v1/models/{created['id']}/artifact")
    assert artifact.status_code == 409  # it exists, and has no compiled library
    assert artifact.json()["type"] == "not_compiled" and artifact.json()["state"] == "cancelled"
    assert service.client.get("/api/v1/models/987654/artifact").status_code == 404


def test_a_compile_whose_worker_died_is_taken_over(service: Service, tuned_cnn: TunedCnn) -> None:
    created = service.client.post("/api/v1/models", json=_body(tiny_cnn())).json()
    assert created["progress"]["tasks_cache_hit"] == created["progress"]["tasks"]
    # A worker claims the compile, then dies (no heartbeat ever again).
    assert service.store.models.claim_compile(created["id"], "dead", timedelta(seconds=60))
    assert service.run_worker() == []  # the claim is fresh: nobody takes it over yet
    assert service.client.get(f"/api/v1/models/{created['id']}").json()["state"] == "compiling"
    context = service.worker("pytest-survivor")
    context.stale_after = timedelta(seconds=-1)  # the dead worker's heartbeat is now stale
    assert run_next(context) == "idle"
    after = service.client.get(f"/api/v1/models/{created['id']}").json()
    assert after["state"] == "succeeded" and after["worker"] == "pytest-survivor"
    assert after["attempt"] == 2


def test_a_compile_that_finds_every_isolated_slot_busy_is_retried_not_failed(
    service: Service, tuned_cnn: TunedCnn
) -> None:
    import threading

    from tuning.jail import holding_slot, set_max_concurrent
    from tuning.jail.isolated import SandboxBusy

    created = service.client.post("/api/v1/models", json=_body(tiny_cnn())).json()
    assert created["progress"]["tasks_cache_hit"] == created["progress"]["tasks"]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holding_slot():
            held.set()
            release.wait(60)

    set_max_concurrent(1)
    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        with pytest.raises(SandboxBusy), holding_slot():  # what the worker's compile meets
            pass
        assert run_next(service.worker("pytest-busy")) == "idle"
        busy = service.client.get(f"/api/v1/models/{created['id']}").json()
        assert busy["state"] == "compiling" and busy["error"] is None  # not failed
    finally:
        release.set()
        holder.join(10)
        set_max_concurrent(2)
    # Once its claim lapses it is ready again, for any worker (the takeover itself is the
    # dead-worker test's above).
    target_ids = [t.id for t in service.store.catalog.list_targets()]
    ready = service.store.models.ready(target_ids, timedelta(seconds=-1))
    assert created["id"] in [m.id for m in ready]
    assert service.client.post(f"/api/v1/models/{created['id']}/cancel").status_code == 200


HOSTILE_RELAX = relax_calling('R.call_packed("system", x, sinfo_args=R.Tensor((4, 16), "float32"))')


@pytest.mark.parametrize(
    ("case", "field"),
    [
        ("truncated", "source"),
        ("not-base64", "source"),
        ("huge-initializer", "source"),
        ("external-data", "source"),
        ("wrong-input-name", "inputs"),
        ("fewer-trials-than-tasks", "trials"),
        ("unknown-layout", "layout"),
        ("relax-call-packed", "source"),
        ("relax-deep-nesting", "source"),
        ("relax-deep-attributes", "source"),
    ],
)
def test_hostile_models_are_refused_and_nothing_is_written(
    service: Service, case: str, field: str
) -> None:
    before = row_counts(service.data_dir, ("models", "jobs", "workloads", "artifacts"))
    body = _body(tiny_cnn())
    if case == "truncated":
        body["source"] = base64.b64encode(tiny_cnn().SerializeToString()[:100]).decode()
    elif case == "not-base64":
        body["source"] = "this is not base64!"
    elif case == "huge-initializer":
        body = _body(huge_initializer())
    elif case == "external-data":
        body = _body(external_data())
    elif case == "fewer-trials-than-tasks":
        body["trials"] = 2  # the tiny CNN has 5 tasks
    elif case == "unknown-layout":
        body["layout"] = "NHWC"
    elif case == "wrong-input-name":
        body["inputs"] = [{"name": "nope", "shape": [1, 3, 16, 16], "dtype": "float32"}]
    elif case.startswith("relax-deep"):  # CPython's parser: MemoryError / RecursionError
        deep = "x = " + "-" * 200_000 + "1\n" if case == "relax-deep-nesting" else (
            "x = a" + ".b" * 200_000 + "\n")  # fmt: skip
        body = {**body, "format": "relax", "source": deep}
    else:
        body = {**body, "format": "relax", "source": HOSTILE_RELAX,
                "inputs": [{"name": "x", "shape": [4, 16], "dtype": "float32"},
                           {"name": "w", "shape": [16, 8], "dtype": "float32"}]}  # fmt: skip
    response = service.client.post("/api/v1/models", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", field], detail
    assert row_counts(service.data_dir, ("models", "jobs", "workloads", "artifacts")) == before
    assert service.client.get("/healthz").status_code == 200


def test_raw_tir_that_nests_too_deeply_is_a_422(service: Service) -> None:
    deep = "x = " + "-" * 20_000 + "1\n"  # within TUNEHUB_MAX_TIR_BYTES
    body = {"tir": {"format": "tvmscript", "source": deep}, "trials": 1}
    response = service.client.post("/api/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    assert "nests too deeply" in response.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("total", "sizes"),
    [
        (64, [1e6, 3e5, 170.0, 2e3, 0.0]),
        (5, [1.0] * 5),
        (1000, [0.0, 0.0]),
        (7, [5.0, 1.0, 1.0]),
        (88, [6e8, 1e6, 1.5e8, 1.0, 6e8, 2.5e7, 2.5e7, 1.7e7, 1.0, 1.0, 4.5e8]),  # BERT's layer
    ],
)
def test_the_budget_split_sums_to_the_total_and_follows_the_work(
    total: int, sizes: list[float]
) -> None:
    shares = split_budget(total, sizes)
    assert sum(shares) == total and all(share >= 1 for share in shares)
    floor = max(1, total // (4 * len(sizes)), min(8, total // len(sizes)))
    assert min(shares) >= floor  # a quarter of the budget, or one batch where it has that
    biggest = max(range(len(sizes)), key=lambda i: sizes[i])
    assert shares[biggest] == max(shares)  # the most work gets the most trials
