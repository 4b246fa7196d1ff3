"""Neighbour answers over the real API, the real jail and a real worker (in process): an
untuned workload the service knows is answered at once with its nearest tuned neighbour's
schedule (refitted, applies and compiles, ``verified: false``) and a high-priority job is
queued; after that job the same lookup gives the tuned, verified best. A catalog operator and
a model task; an answer whose verification fails (against a reference the test perturbs) is
withdrawn and never offered again. Plus the store aggregate on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tvm
from tvm.s_tir.meta_schedule.tir_integration import compile_tir

from schedules_db import Store, make_engine
from schedules_db.values import NewNeighbourAnswer
from service.app.usecases.neighbour_answers import NEIGHBOUR_PRIORITY
from service.client import TunehubClient
from service.client.tvm_database import TunehubDatabase
from service.entry.app import create_app
from service.shared.settings import Settings
from service.worker import neighbour_check, verification
from service.worker.execution import WorkerContext, run_next
from tests.conftest import ServerThread
from tests.schedules_db.published import publish
from tests.tuning.model_cases import TINY_RELAX
from tuning.catalog import get_operator
from tuning.catalog.workload import WorkloadSpec, catalog_workload
from tuning.hardware.host import current_tvm_series
from tuning.hardware.targets import resolve_target

LOOKUP = "/api/v1/lookup"
# Big enough that a 4-trial search beats the plain function (a best that is the plain function
# has no trace to refit, so it is nobody's neighbour).
TUNED = (128, 128, 128)


@dataclass
class Service:
    client: httpx.Client
    data_dir: Path
    store: Store
    url: str

    def run_worker(self) -> list[str]:
        """Run a worker until nothing is left; the outcome of each job."""
        context = WorkerContext(
            store=self.store,
            artifact_dir=self.data_dir / "artifacts",
            worker_name="pytest-neighbours",
            stale_after=timedelta(seconds=60),
            num_trials_per_iter=4,
            seed=0,
            target_ids=tuple(t.id for t in self.store.catalog.list_targets()),
        )
        outcomes = []
        while (outcome := run_next(context)) != "idle":
            outcomes.append(outcome)
        return outcomes

    def lookup(self, hashes: list[str], **extra: Any) -> dict[str, Any]:
        response = self.client.post(LOOKUP, json={"target": "host", "workloads": hashes, **extra})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    data_dir = tmp_path_factory.mktemp("neighbours")
    # max_trials caps the verifying jobs' budget too: 4 trials keep the test short.
    app = create_app(Settings(data_dir=data_dir, max_trials=4), run_reaper=False)
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=300) as client:
        store = Store(make_engine(f"sqlite:///{data_dir / 'tunehub.db'}"), current_tvm_series())
        yield Service(client, data_dir, store, server.url)


def _matmul(m: int, n: int, k: int) -> WorkloadSpec:
    op = get_operator("matmul")
    assert op is not None
    return catalog_workload("matmul", op.Params.model_validate({"M": m, "N": n, "K": k}))


def _known(service: Service, spec: WorkloadSpec) -> str:
    """Make a catalog workload known to the service without tuning it; its hash."""
    service.store.catalog.get_or_create_workload(
        spec.shash, spec.mod_json, spec.operator, spec.params, spec.flop
    )
    return spec.shash


def _tune_matmul(service: Service, m: int, n: int, k: int) -> None:
    body = {"operator": {"name": "matmul", "params": {"M": m, "N": n, "K": k}},
            "target": "host", "trials": 4}  # fmt: skip
    created = service.client.post("/api/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    if created.json()["state"] != "succeeded":
        assert service.run_worker() == ["succeeded"]


def _best(service: Service, shash: str, target_id: int) -> int | None:
    workload = service.store.catalog.find_workload(shash)
    assert workload is not None
    best = service.store.schedules.best(workload.id, target_id)
    return None if best is None else best.id


def _replays_and_compiles(mod: Any, trace_json: str) -> Any:
    """What a build does with an answer: replay its trace on the workload and compile it."""
    import tvm
    from tvm.s_tir.schedule import Schedule, Trace

    sch = Schedule(mod)
    Trace.apply_json_to_schedule(json.loads(trace_json), sch)
    target = tvm.target.Target(resolve_target("host").canonical)
    return tvm.compile(sch.mod, target=target).jit()


def test_a_catalog_workload_gets_its_neighbours_answer_then_its_tuned_best(
    service: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _tune_matmul(service, *TUNED)
    spec = _matmul(96, 128, 64)
    shash = _known(service, spec)

    # Old clients see exactly today's answer: missing, no new keys.
    plain = service.lookup([shash])
    assert plain["schedules"] == {} and plain["missing"] == [shash] and "withdrawn" not in plain

    answer = service.lookup([shash], allow_neighbour=True)
    assert answer["missing"] == [] and answer["withdrawn"] == []
    given = answer["schedules"][shash]
    assert given["provenance"] == "neighbour" and given["verified"] is False
    job = service.store.jobs.get(given["job_id"])
    assert job is not None
    tuned = _best(service, _matmul(*TUNED).shash, job.target_id)
    assert tuned is not None and given["neighbour_schedule_id"] == tuned
    assert given["record"]["args_info"][0] == ["TENSOR", "float32", [96, 64]]
    # It applies and compiles on the requested workload, and computes the matmul.
    module = _replays_and_compiles(spec.mod, given["record"]["trace_json"])

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 64), "float32"), rng.standard_normal((64, 128), "float32")
    c = tvm.runtime.tensor(np.zeros((96, 128), "float32"))
    module["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    # A job verifies and tunes it, at the service's priority; nothing ran yet.
    assert job.state == "queued" and job.priority == NEIGHBOUR_PRIORITY
    # Asked again: the same answer, not made again, no second job.
    again = service.lookup([shash], allow_neighbour=True)
    assert again["schedules"][shash] == given
    # A build's TunehubDatabase takes it only when it asks for neighbour answers.
    target = tvm.target.Target(resolve_target("host").canonical)
    with TunehubClient(service.url) as light:
        assert TunehubDatabase(light, target).prefetch(spec.mod) == 0
        instant = TunehubDatabase(light, target, allow_neighbour=True)
        assert instant.prefetch(spec.mod) == 1
        assert compile_tir(instant, spec.mod, target) is not None

    assert service.run_worker() == ["succeeded"]
    after = service.lookup([shash], allow_neighbour=True)["schedules"][shash]
    assert after["provenance"] == "tuned" and after["verified"] is True
    best = _best(service, shash, job.target_id)
    assert best is not None and after["schedule_id"] == best
    (stored,) = service.store.neighbours.for_workloads(job.target_id, [job.workload_id])
    assert stored.state == "superseded"
    assert service.lookup([shash])["schedules"][shash]["schedule_id"] == best


class _Perturbed(verification.Reference):
    """The reference, off by one: every candidate fails against it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.expected = self.expected + 1.0


def test_an_answer_that_fails_verification_is_withdrawn(
    service: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _tune_matmul(service, *TUNED)
    spec = _matmul(128, 96, 128)
    shash = _known(service, spec)
    given = service.lookup([shash], allow_neighbour=True)["schedules"][shash]
    assert given["provenance"] == "neighbour"
    target = tvm.target.Target(resolve_target("host").canonical)
    with TunehubClient(service.url) as light:  # a build takes it, and caches it
        assert TunehubDatabase(light, target, allow_neighbour=True).prefetch(spec.mod) == 1

    monkeypatch.setattr(neighbour_check, "Reference", _Perturbed)
    monkeypatch.setattr(verification, "Reference", _Perturbed)  # the tuned ones fail too
    assert service.run_worker() == ["failed"]
    answer = service.store.neighbours.get(given["schedule_id"])
    assert answer is not None and answer.state == "withdrawn"
    assert answer.reason is not None and "differs from the reference" in answer.reason

    for _ in range(2):  # never offered again, and listed so clients drop cached copies
        after = service.lookup([shash], allow_neighbour=True)
        assert after["schedules"] == {} and after["missing"] == [shash]
        assert after["withdrawn"] == [shash]
    assert len(service.store.neighbours.for_workloads(answer.target_id, [answer.workload_id])) == 1


RELAX_A = TINY_RELAX.replace("(4, 16)", "(64, 128)").replace("(16, 8)", "(128, 128)")
RELAX_B = TINY_RELAX.replace("(4, 16)", "(32, 128)").replace("(16, 8)", "(128, 96)")


def _model(service: Service, source: str, x: list[int], w: list[int]) -> dict[str, Any]:
    body = {"name": "mlp", "format": "relax", "source": source, "trials": 4,
            "inputs": [{"name": "x", "shape": x, "dtype": "float32"},
                       {"name": "w", "shape": w, "dtype": "float32"}]}  # fmt: skip
    response = service.client.post("/api/v1/models", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_a_model_task_gets_the_answer_of_its_kind_then_its_tuned_best(service: Service) -> None:
    import tvm

    tuned = _model(service, RELAX_A, [64, 128], [128, 128])
    service.run_worker()  # tunes its tasks (cache hits where another test tuned them first)
    done = service.client.get(f"/api/v1/models/{tuned['id']}").json()
    assert {t["job"]["state"] for t in done["tasks"]} == {"succeeded"}
    # The other shape's tasks are known (uploaded), but not tuned: its jobs are cancelled.
    other = _model(service, RELAX_B, [32, 128], [128, 96])
    assert service.client.post(f"/api/v1/models/{other['id']}/cancel").status_code == 200
    tasks = {t["name"]: t for t in other["tasks"]}
    task = next(t for name, t in tasks.items() if name.startswith("fused_matmul"))
    workload = service.store.catalog.get_workload(task["workload_id"])
    assert workload is not None and workload.params == {"task": task["name"]}

    answer = service.lookup([workload.shash], allow_neighbour=True)
    given = answer["schedules"][workload.shash]
    assert given["provenance"] == "neighbour" and given["verified"] is False
    job = service.store.jobs.get(given["job_id"])
    assert job is not None and job.state == "queued" and job.priority == NEIGHBOUR_PRIORITY
    source_task = next(t for t in tuned["tasks"] if t["name"] == task["name"])
    source = service.store.schedules.best(source_task["workload_id"], job.target_id)
    assert source is not None and given["neighbour_schedule_id"] == source.id
    _replays_and_compiles(tvm.ir.load_json(workload.mod_json), given["record"]["trace_json"])

    assert set(service.run_worker()) == {"succeeded"}
    after = service.lookup([workload.shash], allow_neighbour=True)["schedules"][workload.shash]
    assert after["provenance"] == "tuned" and after["verified"] is True


@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
def test_the_store_offers_withdraws_and_supersedes_once(store: Store) -> None:
    schedule_id, job_id = publish(store, "matmul", 8)
    job = store.jobs.get(job_id)
    assert job is not None
    (candidate,) = store.neighbours.candidates(job.target_id, "matmul")
    assert (
        candidate.params == {"M": 8, "N": 8, "K": 8}
        and store.neighbours.candidates(job.target_id, None) == []
    )  # no user workload is tuned
    (source,) = store.neighbours.sources(job.target_id, [candidate.id, 10**6])
    assert source.schedule_id == schedule_id and source.params == {"M": 8, "N": 8, "K": 8}
    store = Store(store.engine, "0.27")  # answers are kept per TVM series
    new = NewNeighbourAnswer(
        workload_id=job.workload_id,
        target_id=job.target_id,
        neighbour_schedule_id=schedule_id,
        neighbour_workload_id=job.workload_id,
        trace_json="[]",
        args_info=[],
        latency_us=1.0,
        space="plain",
        tvm_version="0.27.0",
        packed_params=[],
    )
    first = store.neighbours.offer(new)
    assert first.state == "offered" and store.neighbours.offer(new).id == first.id  # made once
    assert [a.id for a in store.neighbours.offered(new.workload_id, new.target_id)] == [first.id]
    assert store.neighbours.withdraw(first.id, "wrong")
    assert not store.neighbours.withdraw(first.id, "again")  # only offered ones move
    assert store.neighbours.offer(new).state == "withdrawn"  # never offered again
    assert store.neighbours.supersede(new.workload_id, new.target_id) == 0
    assert store.neighbours.offered(new.workload_id, new.target_id) == []


RELAX_C = TINY_RELAX.replace("(4, 16)", "(48, 128)").replace("(16, 8)", "(128, 64)")
TASKS = "/api/v1/tasks"


def test_a_build_sends_its_missing_tasks_and_gets_neighbour_answers_at_once(
    service: Service,
) -> None:
    """``tune_missing``: a build whose tasks the service has never seen sends them; they are
    stored under the build's own hashes, the matmul task is answered at once by the tuned
    RELAX_A's (a neighbour, its verifying job at the service's priority), the others get a
    tuning job."""
    import warnings

    from tvm.script.parser.core.entry import parse

    _model(service, RELAX_A, [64, 128], [128, 128])  # tuned (cache hits when it ran before)
    service.run_worker()
    target = tvm.target.Target(resolve_target("host").canonical)
    module = parse(RELAX_C.replace("from tvm.script import", "#"))
    before = len(service.store.catalog.list_workloads(limit=100_000))
    with TunehubClient(service.url) as client, warnings.catch_warnings():
        warnings.simplefilter("error")  # a hash the service disagrees on would warn
        database = TunehubDatabase(
            client, target, cache=False, allow_neighbour=True, tune_missing=True
        )
        answered = database.prefetch(module)
        states = {s["name"]: s for s in database.sent.values()}
        assert set(database.sent) == {s["workload"] for s in database.sent.values()}
    matmul = next(s for name, s in states.items() if name.startswith("fused_matmul"))
    assert matmul["state"] == "neighbour" and answered >= 1
    job = service.store.jobs.get(matmul["job_id"])
    assert job is not None and job.priority == NEIGHBOUR_PRIORITY and job.state == "queued"
    assert all(s["state"] in ("queued", "neighbour") for s in states.values())
    assert len(service.store.catalog.list_workloads(limit=100_000)) == before + len(states)
    given = service.lookup([matmul["workload"]], allow_neighbour=True)["schedules"]
    assert given[matmul["workload"]]["provenance"] == "neighbour"

    # Sent again (another build): no second job for a task with one under way.
    with TunehubClient(service.url) as client:
        again = client.upload_tasks("host", [(n, _task_json(module, target, n)) for n in states])
    assert {t["state"] for t in again["tasks"]} <= {"neighbour", "tuning"}
    assert {t["job_id"] for t in again["tasks"]} == {s["job_id"] for s in states.values()}
    # (What the answer's job does next — verify, tune, serve the verified best — is the model
    # task test's above; running it again here would only lengthen the suite.)
    for job_id in {s["job_id"] for s in states.values()}:
        assert service.client.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200


def _task_json(module: Any, target: Any, name: str) -> str:
    """The task ``name`` of ``module`` as a build sends it (the module MetaSchedule queries)."""
    from tuning.models.pipeline import tuning_pipeline

    fused = tuning_pipeline(module, target)
    func = fused[name]
    return str(tvm.ir.save_json(tvm.IRModule({"main": func.with_attr("global_symbol", "main")})))


CALLS_SYSTEM = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("b"):
            v = T.axis.remap("S", [i])
            B[v] = A[v] + T.call_extern("float32", "system", A[v])
"""


@pytest.mark.parametrize(
    "module, says",
    [
        ('{"root": 1, "nodes": [{"type_key": "tirx.PrimFunc"', "task 0"),
        ("calls_system", "call_extern"),
    ],
)
def test_a_hostile_task_is_refused_and_nothing_is_written(
    service: Service, module: str, says: str
) -> None:
    if module == "calls_system":
        from tvm.script.parser.core.entry import parse

        module = str(tvm.ir.save_json(tvm.IRModule({"main": parse(CALLS_SYSTEM)})))
    before = len(service.store.catalog.list_workloads(limit=100_000))
    jobs = len(service.store.jobs.list_jobs(limit=1000))
    body = {"target": "host", "tasks": [{"name": "fused_x", "module": module}]}
    response = service.client.post(TASKS, json=body)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "tasks"] and says in error["msg"]
    assert len(service.store.catalog.list_workloads(limit=100_000)) == before
    assert len(service.store.jobs.list_jobs(limit=1000)) == jobs
