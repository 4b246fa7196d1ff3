"""Schemathesis against a real uvicorn server of the app (SQLite store, SQLite broker, no
workers, auth on with an admin token), with every check it has (``--checks all``) and the
project's `schemathesis.toml` (what the document cannot say, operation by operation): no 5xx,
every status and body as documented, valid requests accepted and invalid ones refused, the
``Allow`` of a 405, events of the job stream, credentials required where declared, and the
stateful phase following the document's links (and the ones it infers). The fuzzing never
names an id that exists, so one published schedule and two jobs are then read by id and
checked the same way: the hot reads answer JSON that FastAPI does not validate. The example
count is bounded so the run takes about 2 minutes: POST /jobs with raw TIR, POST /models,
POST /import and POST /tasks parse in an isolated child each (1-3 s), so those get fewer
examples. Counts are printed at the end (``pytest -s``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.tokens import ADMIN, TokenStore
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread
from tests.schedules_db.published import publish
from tuning.hardware.host import current_tvm_series

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ["all"]  # as `st run --checks all`
PARSING = [  # a child process per parse
    ("POST", "/api/v1/jobs"),
    ("POST", "/api/v1/import"),
    ("POST", "/api/v1/tasks"),
    ("POST", "/api/v1/models"),
]
EXAMPLES, PARSING_EXAMPLES, STATEFUL_SCENARIOS = 60, 10, 12


@dataclass
class Tally:
    """What the fuzzing sent and got back."""

    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    per_operation: Counter = field(default_factory=Counter)
    operations: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)


TALLY = Tally()


def admin_headers(settings_: Settings) -> dict[str, str]:
    """The hook for auth: an admin token made in the store, as the server's operator would
    (`tunehub token create`). With ``Settings.auth`` False this returns no header."""
    if not settings_.auth:
        return {}
    engine = make_engine(settings_.store_url)
    upgrade_schema(engine)
    text, _ = TokenStore(engine).create("fuzzer", [ADMIN])
    engine.dispose()
    return {"Authorization": f"Bearer {text}"}


def _settings(data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir,
        max_trials=64,
        auth=True,  # the hook: False runs the same fuzzing with auth off
        write_rate_per_s=0,  # the write limit would answer most POSTs 429 (documented; dull)
        max_active_jobs=0,  # no cap on queued jobs either
    )


@pytest.fixture(scope="module")
def fuzz_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return _settings(tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def server(fuzz_settings: Settings) -> Iterator[tuple[ServerThread, dict]]:
    settings_ = fuzz_settings
    headers = admin_headers(settings_)
    with ServerThread(create_app(settings_, run_reaper=False)) as running:
        yield running, headers
    print(
        f"\nschemathesis: {TALLY.requests} requests over {len(TALLY.operations)} operations, "
        f"statuses {dict(sorted(TALLY.statuses.items()))}, {len(TALLY.failures)} failures\n"
        + "\n".join(f"  {k}: {v}" for k, v in sorted(TALLY.per_operation.items()))
    )


def _schema() -> schemathesis.BaseSchema:
    """The app's OpenAPI document (built without starting it), set up for the checks with the
    project's `schemathesis.toml`."""
    config = SchemathesisConfig.from_path(ROOT / "schemathesis.toml")
    schema = schemathesis.openapi.from_dict(
        create_app(_settings(Path("."))).openapi(), config=config
    )
    schema.config.checks.update(included_check_names=CHECKS, max_response_time=10)
    schema.config.generation.update(modes=list(GenerationMode), max_examples=EXAMPLES)
    return schema


def _parses(ctx: object) -> bool:
    operation = ctx.operation  # type: ignore[attr-defined]
    return (operation.method.upper(), operation.path) in PARSING


def _call(case: schemathesis.Case, server: tuple[ServerThread, dict]) -> None:
    running, headers = server
    label = case.operation.label
    TALLY.operations.add(label)
    response = case.call(base_url=running.url, headers=headers, timeout=60)
    _count(label, response.status_code)
    try:  # the headers given: `ignored_auth` resends without them and with wrong ones
        case.validate_response(response, headers=headers)
    except Exception:
        TALLY.failures.append(f"{label} -> {response.status_code}")
        raise


def _count(label: str, status: int) -> None:
    TALLY.requests += 1
    TALLY.statuses[status] += 1
    TALLY.per_operation[f"{label} {status}"] += 1


SETTINGS = settings(
    deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None
)
lookups = _schema().exclude(func=_parses)
parsing = _schema().include(func=_parses)


@lookups.parametrize()
@SETTINGS
def test_no_5xx_and_every_status_documented(
    case: schemathesis.Case, server: tuple[ServerThread, dict]
) -> None:
    _call(case, server)


@parsing.parametrize()
@settings(SETTINGS, max_examples=PARSING_EXAMPLES)
def test_no_5xx_and_every_status_documented_where_code_is_parsed(
    case: schemathesis.Case, server: tuple[ServerThread, dict]
) -> None:
    _call(case, server)


def test_stateful_scenarios_follow_the_links(server: tuple[ServerThread, dict]) -> None:
    """The stateful phase: sequences of calls, each feeding ids from one answer to the next
    request (the links the document declares and those schemathesis infers), every answer
    checked as above (and a resource a POST created must then be found)."""
    running, headers = server

    class Scenarios(_schema().as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: schemathesis.Case) -> dict:
            return {"base_url": running.url, "headers": headers, "timeout": 60}

        def after_call(self, response: object, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            TALLY.operations.add(case.operation.label)
            _count(case.operation.label, response.status_code)  # type: ignore[attr-defined]

    Scenarios.run(
        settings=settings(SETTINGS, max_examples=STATEFUL_SCENARIOS, stateful_step_count=6)
    )


def test_the_hot_reads_answer_what_their_schemas_say(
    server: tuple[ServerThread, dict], fuzz_settings: Settings
) -> None:
    """The fuzzing names random ids and publishes nothing, so it never reads a job, schedule or
    workload that exists: here a published schedule (written through the store, as a worker
    would) and a queued job are read by id and their 200s checked against the documented
    schemas (the hot reads answer pre-serialised JSON that FastAPI does not validate)."""
    running, headers = server
    engine = make_engine(fuzz_settings.store_url)
    store = Store(engine, tvm_series=current_tvm_series())
    schedule_id, done_id = publish(store, "matmul", 8, fuzz_settings.artifacts)
    schedule = store.schedules.get(schedule_id)
    assert schedule is not None
    queued = store.jobs.create(schedule.workload_id, schedule.target_id, 10**4, "q", "fuzzer")
    engine.dispose()
    reads = [
        ("/api/v1/jobs/{job_id}", {"job_id": done_id}, None),
        ("/api/v1/jobs/{job_id}", {"job_id": queued.id}, None),
        ("/api/v1/jobs", None, None),
        ("/api/v1/schedules/{schedule_id}", {"schedule_id": schedule_id}, None),
        ("/api/v1/schedules", None, {"operator": "matmul"}),
        ("/api/v1/workloads/{workload_id}", {"workload_id": schedule.workload_id}, None),
        ("/api/v1/export", None, {"target": "znver4-2c"}),
    ]
    for path, path_parameters, query in reads:
        case = lookups[path]["GET"].Case(path_parameters=path_parameters, query=query)
        response = case.call(base_url=running.url, headers=headers, timeout=60)
        assert response.status_code == 200, (path, response.text)
        assert response.json(), path
        case.validate_response(response, headers=headers)


def test_the_fuzzed_server_is_still_up(server: tuple[ServerThread, dict]) -> None:
    running, _ = server
    assert httpx.get(running.url + "/healthz").status_code == 200
    assert not TALLY.failures, TALLY.failures
