"""Raw TIR jobs over the real API: one workload with the catalog, hostile input refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread
from tests.service.rows import row_counts
from tests.tuning.escapes import running
from tuning.catalog import get_operator
from tuning.catalog.workload import catalog_workload

SHAPE = {"M": 8, "N": 12, "K": 4}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    data_dir = tmp_path_factory.mktemp("tir")
    # No parse-time quota: one identity uploads function after function here (a busy host's
    # parses would run it into debt).
    app = create_app(Settings(data_dir=data_dir, parse_seconds_per_minute=0), run_reaper=False)
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        yield client, data_dir


TABLES = ("jobs", "workloads")


def test_a_users_function_never_takes_over_the_catalog_workload(api: tuple) -> None:
    """The same function as TVMScript and as JSON is one user workload; the catalog's, built
    by the service itself, is keyed apart even though it hashes the same."""
    client, _ = api
    spec = catalog_workload("matmul", get_operator("matmul").Params(**SHAPE))
    by_script = client.post(
        "/api/v1/jobs",
        json={"tir": {"format": "tvmscript", "source": spec.mod.script()}, "trials": 4},
    )
    by_json = client.post(
        "/api/v1/jobs", json={"tir": {"format": "json", "source": spec.mod_json}, "trials": 4}
    )
    by_name = client.post(
        "/api/v1/jobs", json={"operator": {"name": "matmul", "params": SHAPE}, "trials": 4}
    ).json()
    assert by_script.status_code == 201, by_script.text
    assert by_json.status_code == 201, by_json.text
    user = by_json.json()["workload"]
    assert by_script.json()["workload"]["id"] == user["id"] != by_name["workload"]["id"]
    assert user["structural_hash"] == by_name["workload"]["structural_hash"] == spec.shash
    assert user["operator"] is None and by_name["workload"]["operator"] == "matmul"
    assert user["flop"] == pytest.approx(2 * 8 * 12 * 4)


HANDWRITTEN = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0) + T.float32(1.0)
"""


def test_handwritten_tvmscript_is_accepted(api: tuple) -> None:
    client, _ = api
    response = client.post(
        "/api/v1/jobs", json={"tir": {"format": "tvmscript", "source": HANDWRITTEN}, "trials": 2}
    )
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["operator"]["name"] is None and job["state"] == "queued"
    assert job["workload"]["flop"] > 0


_EXTERN = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    with T.sblock("b"):
        T.evaluate({})
        B[0, 0] = A[0, 0]
"""
_OUT_OF_BOUNDS = HANDWRITTEN.replace("B[vi, vj] =", "B[vi + 1, vj] =")
# The security probe of c7ee873 (issue 25): Python run in the parse child through
# I.entry.inspect (findings 3), a shape whose byte count wrapped to 0 (4), and a function of
# bare loops that the worker then failed on with an AttributeError (5).
_COPY = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer({shape}, "float32"), B: T.Buffer((16,), "float32")):
    for i in range({extent}):
        with T.sblock("b"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi, 0]
"""
_PROBE_CHAIN = _COPY.format(
    shape="(16, 1)",
    extent='16 + (I.entry.inspect.builtins.exec("import os; os.getcwd()") or 0)',
)
_WRAPPING_SHAPE = _COPY.format(shape="(4294967296, 4294967296)", extent="16")
_BARE_LOOPS = """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        B[i] = A[i]
"""
_MATMUL_SCRIPT = catalog_workload("matmul", get_operator("matmul").Params(**SHAPE)).mod.script()


@pytest.mark.parametrize(
    "fmt, source, reason",
    [
        ("tvmscript", "import os\n" + _MATMUL_SCRIPT, "import of os"),
        (
            "tvmscript",
            _MATMUL_SCRIPT.replace('"float32"', '__import__("os").getcwd()', 1),
            "__import__",
        ),
        ("tvmscript", "print(1)\n" + _MATMUL_SCRIPT, "only a @T.prim_func"),
        ("tvmscript", "def f(:", "syntax"),
        # An expression that would run (and allocate) forever: killed by the CPU limit.
        ("tvmscript", _MATMUL_SCRIPT.replace("(8, 4)", "(10**10**10, 4)", 1), "limit"),
        ("tvmscript", _MATMUL_SCRIPT.replace("(8, 4)", "(100000, 100000)", 1), "bytes"),
        ("json", '{"root": 1, "nodes": [', "JSON"),
        ("json", '{"root": 1, "nodes": [], "b64ndarrays": []}', "Error"),
        # An array holding itself: it crashed TVM's loader in the jail (SIGSEGV, still
        # tests/tuning/test_sandbox.py's case); the block count refuses the loop before that.
        ("json", '{"root_index": 0, "nodes": [{"type": "ffi.Array", "data": [0]}]}', "a loop"),
        ("tvmscript", _EXTERN.format('T.call_extern("int32", "system", "touch owned")'),
         "call_extern"),
        ("tvmscript", _EXTERN.format('T.call_packed("tunehub.x", A[0, 0])'), "not allowed"),
        ("tvmscript", _OUT_OF_BOUNDS, "cannot prove"),
        ("tvmscript", running("open('pwned', 'w').write('owned')"), "'eval' is not allowed"),
        ("tvmscript", _PROBE_CHAIN, "'I.entry.inspect.builtins.exec' is not one TVMScript offers"),
        ("tvmscript", _WRAPPING_SHAPE, "buffers take 73786976294838206528 bytes"),
        ("tvmscript", _BARE_LOOPS, "root block"),
        ("tvmscript", _MATMUL_SCRIPT.replace('"float32"', 'open("pwned", "w").write("x")', 1),
         "'open' is not allowed"),
    ],
    ids=["import", "dunder", "statement", "syntax", "cpu-bomb", "huge", "bad-json", "bad-graph",
         "self-loop", "call-extern", "call-packed", "out-of-bounds", "eval-open", "probe-chain",
         "wrapping-shape", "bare-loops", "open"],
)  # fmt: skip
def test_hostile_or_malformed_tir_is_a_422_and_writes_nothing(
    api: tuple, fmt: str, source: str, reason: str
) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    response = client.post(
        "/api/v1/jobs", json={"tir": {"format": fmt, "source": source}, "trials": 2}
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", "tir", "source"]
    assert reason in detail[0]["msg"], detail
    assert row_counts(data_dir, TABLES) == before
    assert client.get("/healthz").json() == {"status": "ok"}  # the service is still up
    assert not Path("owned").exists() and not Path("pwned").exists()


def test_exactly_one_of_operator_and_tir(api: tuple) -> None:
    client, data_dir = api
    before = row_counts(data_dir, TABLES)
    both = {
        "operator": {"name": "matmul", "params": SHAPE},
        "tir": {"format": "json", "source": "{}"},
        "trials": 2,
    }
    for body in (both, {"trials": 2}):
        response = client.post("/api/v1/jobs", json=body)
        assert response.status_code == 422
        assert "exactly one" in response.json()["detail"][0]["msg"]
    assert (
        client.post(
            "/api/v1/jobs", json={"tir": {"format": "onnx", "source": "x"}, "trials": 2}
        ).status_code
        == 422
    )
    assert row_counts(data_dir, TABLES) == before


def test_one_identity_parses_one_upload_at_a_time(tmp_path: Path) -> None:
    """Of three raw-TIR jobs one client sends at once, one is parsed and the others are told
    when to come back (a single token cannot hold every parser slot); nothing is written for
    them. The process-wide cap (TUNEHUB_MAX_PARSES) is tested in tests/tuning/test_sandbox."""
    from concurrent.futures import ThreadPoolExecutor

    app = create_app(Settings(data_dir=tmp_path), run_reaper=False)
    body = {"tir": {"format": "tvmscript", "source": HANDWRITTEN}, "trials": 2}
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda _: client.post("/api/v1/jobs", json=body), range(3)))
        codes = sorted(a.status_code for a in answers)
        assert codes[0] == 201 and 429 in codes, [a.text for a in answers]
        busy = next(a for a in answers if a.status_code == 429)
        assert int(busy.headers["retry-after"]) >= 1
        assert busy.json()["type"] == "parse_in_progress"
        assert row_counts(tmp_path, TABLES) == (codes.count(201), 1)
