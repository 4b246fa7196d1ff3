"""The import table of the issue, read off the source: every ``import`` and ``from ... import``
of `schedules_db`, `schedule_reads`, `tuning` and `service` (function-level and
``TYPE_CHECKING`` ones included, relative ones resolved) obeys its package's rule, and the
modules import one another without a cycle.

Run as a script (``python tests/test_import_contracts.py``) to print the arrows between the
packages with their counts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

if __package__ in (None, ""):  # run as a script: the repository root holds `tests`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.import_graph import (  # noqa: E402
    ROOT,
    STDLIB,
    Import,
    all_imports,
    arrows,
    cycles,
    describe,
    imports_of,
    internal_graph,
    source_modules,
    under,
)

# A build hashes its tasks after the very pipeline model jobs extract them with: the light
# client imports that one module of `tuning` (TVM only), never a copy of it.
PIPELINE = "tuning.models.pipeline"
FAST_MATH = "tuning.models.fast_math"  # the pipeline's rewrite of exp, erf, tanh, GELU: TVM only
BLOCKED = "tuning.models.blocked_layout"  # the pipeline's blocked channel layout: TVM only
PRECISION = "tuning.models.precision"  # the pipeline's bf16 rewrite of matmuls and convs: TVM only
BF16_LAYOUT = "tuning.models.bf16_layout"  # the pipeline's NHWC layout of bf16 convs: TVM only
CALL_REWRITE = "tuning.models.call_rewrite"  # the rewrites' one-call-at-a-time mutator: TVM only
BF16 = "tuning.hardware.bf16"  # tunehub's bf16 tensor intrinsic a replayed trace names: TVM only
AMX = "tuning.hardware.amx"  # tunehub's AMX tile intrinsics a replayed trace names: TVM only
# What a process checks before it loads a library or replays a trace (the worker and a build
# alike): standard library only, so the light client runs the same checks.
CHECKS = ("tuning.checks.library_check", "tuning.checks.trace_gate")
LIGHT = (
    "httpx", "tvm", "tvm_ffi", "schedule_reads", "service.client", PIPELINE, FAST_MATH, BLOCKED,
    PRECISION, BF16, AMX, "tuning.ir", *CHECKS
)  # fmt: skip
# The command-line entry modules start either side of the service; at module level they stay
# light (`tunehub --help` and the client commands import no server), heavy imports go in handlers.
ENTRY = (
    "service.entry.cli",
    "service.entry.host_cli",
    "service.entry.token_cli",
    "service.entry.artifact_cli",
    "service.entry.supervisor",
    "service.entry.top_level",
)
ENTRY_MODULE_LEVEL = (*LIGHT, *ENTRY, "service.shared.settings")


@dataclass(frozen=True)
class Rule:
    """What the modules under ``scope`` may (``only``) or must not (``never``) import; a name
    covers the module and everything under it. Stdlib is always allowed."""

    scope: str
    text: str
    only: tuple[str, ...] = ()
    never: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()  # modules under scope the rule does not apply to
    module_level_only: bool = False  # the rule binds module-level imports only

    def applies(self, imp: Import) -> bool:
        if not under(imp.module, (self.scope,)) or under(imp.module, self.exempt):
            return False
        return not (self.module_level_only and (imp.function_level or imp.type_checking))

    def breaks(self, imp: Import) -> bool:
        if imp.target.split(".")[0] in STDLIB:
            return False
        if self.only and not under(imp.target, self.only):
            return True
        return under(imp.target, self.never)


# `service` by role, top to bottom: each may import only what sits below it (arrows run down).
ROLES = {
    "service.entry": "the commands, the app and the reaper",
    "service.dashboard": "the HTML pages",
    "service.api": "the REST routes",
    "service.web": "HTTP plumbing of the API and the dashboard",
    "service.worker": "the Celery worker",
    "service.app": "use cases, read views, response shapes and domain refusals (no HTTP)",
    "service.shared": "what the API side and the worker share",
    "service.client": "the light client",
}
# `tuning` by stage, bottom floor first: a folder may import itself and the floors below it,
# never a folder beside it or above (function-level imports included).
TUNING_FLOORS = (
    ("tuning.ir", "tuning.traces"),  # IRModule helpers; traces as the store keeps them
    ("tuning.checks", "tuning.hardware"),  # what every stage checks; the machine and its targets
    ("tuning.catalog", "tuning.models"),  # the operators; whole models and their pipeline
    ("tuning.jail",),  # the isolation machinery, and nothing it runs
    ("tuning.publish",),  # verification, packed layouts, the interchange format
    ("tuning.measure",),  # where kernels run and how they are timed
    ("tuning.search",),  # MetaSchedule's search with tunehub's spaces, seeds and cost model
    ("tuning.untrusted",),  # user input handled in the jail: its requests and their callers
)
# The only function-level imports from one `tuning` module of another, each with its reason: a
# deferral never dodges a cycle (the floors forbid those), it keeps a heavy import off a path.
TUNING_DEFERRED = {
    ("tuning.search.spaces", "tuning.search.channel_vectors"): "TVM, off the API's space names",
    ("tuning.search.spaces", "tuning.search.micro_kernels"): "TVM, off the API's space names",
    ("tuning.search.spaces", "tuning.search.bf16_rule"): "TVM, off the API's space names",
    ("tuning.measure.kernel_child", "tuning.catalog.dtypes"): "numpy, after stdout is moved",
    ("tuning.untrusted.child", "tuning.untrusted.requests"): "every request, after stdout is moved",
}
WORKER_NEVER = (
    "fastapi", "starlette", "service.api", "service.web", "service.dashboard", "service.entry",
    "service.client",
)  # fmt: skip
# The application layer: below HTTP and the worker, which both call it; never HTTP itself.
APP_NEVER = (
    "fastapi", "starlette", "service.web", "service.api", "service.dashboard", "service.entry",
    "service.worker", "service.client",
)  # fmt: skip
RULES = (
    Rule("schedule_reads", "schedule_reads: stdlib only", only=("schedule_reads",)),
    Rule(
        "schedules_db",
        "schedules_db: SQLAlchemy, Alembic, stdlib (+ schedule_reads)",
        only=("schedules_db", "schedule_reads", "sqlalchemy", "alembic"),
    ),
    Rule(
        "tuning",
        "tuning: never schedules_db, service, FastAPI, Celery, SQLAlchemy",
        never=(
            "schedules_db",
            "service",
            "fastapi",
            "starlette",
            "celery",
            "kombu",
            "sqlalchemy",
            "alembic",
        ),
    ),
    *(
        Rule(
            room,
            f"{room}: only its own folder and the floors below it",
            never=tuple(r for above in TUNING_FLOORS[level:] for r in above if r != room),
        )
        for level, floor in enumerate(TUNING_FLOORS)
        for room in floor
    ),
    Rule("tuning.jail", "the isolation machinery: standard library only", only=("tuning.jail",)),
    Rule(
        PIPELINE,
        "the shared model pipeline: TVM only",
        only=("tvm", "tvm_ffi", "tuning.ir", FAST_MATH, BLOCKED, PRECISION, BF16_LAYOUT),
    ),
    Rule(FAST_MATH, "the pipeline's fast math: TVM only", only=("tvm",)),
    Rule(
        BLOCKED,
        "the pipeline's blocked layout: TVM only",
        only=("tvm", "tvm_ffi", BF16_LAYOUT, CALL_REWRITE),
    ),
    Rule(BF16_LAYOUT, "the pipeline's bf16 conv layout: TVM only", only=("tvm", CALL_REWRITE)),
    Rule(CALL_REWRITE, "the rewrites' call mutator: TVM only", only=("tvm",)),
    Rule(BF16, "tunehub's bf16 tensor intrinsic: TVM only", only=("tvm", "tvm_ffi", AMX)),
    Rule(AMX, "tunehub's AMX tile intrinsics: TVM only", only=("tvm",)),
    Rule(PRECISION, "the pipeline's bf16 rewrite: TVM only", only=("tvm", CALL_REWRITE)),
    Rule(
        "tuning.ir", "IR helpers: TVM only (the light client imports them)", only=("tvm", "tvm_ffi")
    ),
    *(Rule(check, "a check before loading: standard library only", only=()) for check in CHECKS),
    Rule("service.worker", "worker package: never FastAPI or the API", never=WORKER_NEVER),
    Rule(
        "service.app",
        "application layer: never HTTP (service.web, FastAPI, Starlette) nor a role that calls it",
        never=APP_NEVER,
    ),
    Rule(
        "service.shared",
        "shared by API and worker: no other part of service, no HTTP",
        never=(*(role for role in ROLES if role != "service.shared"), "fastapi", "starlette"),
    ),
    Rule(
        "service.web",
        "HTTP plumbing: never the routes, the pages, the entry points, the worker, the client",
        never=(
            "service.api",
            "service.dashboard",
            "service.entry",
            "service.worker",
            "service.client",
        ),  # fmt: skip
    ),
    Rule(
        "service.api",
        "REST routes: never the pages, the entry points, the worker or the light client",
        never=("service.dashboard", "service.entry", "service.worker", "service.client"),
    ),
    Rule(
        "service.dashboard",
        "pages: never the entry points, the worker or the light client",
        never=("service.entry", "service.worker", "service.client"),
    ),
    Rule(
        "service",
        "API side: never the worker package",
        never=("service.worker",),
        exempt=("service.worker", "service.client", "service.entry"),
    ),
    Rule("service.client", "light client: httpx, tvm, stdlib, schedule_reads", only=LIGHT),
    *(
        Rule(
            entry,
            "CLI entry: light at module level (heavy imports inside the handlers)",
            only=ENTRY_MODULE_LEVEL,
            module_level_only=True,
        )
        for entry in ENTRY
    ),
)


def violations(imports: list[Import]) -> list[str]:
    """``file:line imports X (rule)`` for every import that breaks a rule."""
    found = []
    for imp in imports:
        for rule in RULES:
            if rule.applies(imp) and rule.breaks(imp):
                kind = " (function-level)" if imp.function_level else ""
                kind += " (TYPE_CHECKING)" if imp.type_checking else ""
                found.append(f"{imp.where()} imports {imp.target}{kind} ({rule.text})")
    return found


def test_every_import_obeys_its_package_rule() -> None:
    found = violations(all_imports())
    assert not found, "\n".join(found)


def test_every_tuning_folder_stands_on_a_floor() -> None:
    rooms = {".".join(m.split(".")[:2]) for m in source_modules() if m.startswith("tuning.")}
    assert rooms == {room for floor in TUNING_FLOORS for room in floor}


def test_a_tuning_module_defers_another_only_for_a_heavy_import() -> None:
    found = [
        f"{imp.where()} imports {imp.target} inside a function: import it at module level"
        for imp in all_imports()
        if imp.function_level
        and under(imp.module, ("tuning",))
        and under(imp.target, ("tuning",))
        and (imp.module, imp.target) not in TUNING_DEFERRED
    ]
    assert not found, "\n".join(found)


def test_no_import_cycles() -> None:
    found = [describe(cycle) for cycle in cycles(internal_graph(all_imports()))]
    assert not found, "\n".join(found)


def test_service_holds_its_role_packages_and_no_loose_module() -> None:
    service = ROOT / "service"
    loose = sorted(p.name for p in service.glob("*.py") if p.name != "__init__.py")
    packages = sorted(f"service.{p.parent.name}" for p in service.glob("*/__init__.py"))
    assert not loose, f"modules outside a role package: {loose}"
    assert packages == sorted(ROLES)


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("service.web.auth", "service.api.deps"),  # plumbing reaching up to the routes
        ("service.app.usecases.dispatch", "service.entry.reaper"),  # a use case up to an entry
        ("service.app.usecases.cancel", "service.web.errors"),  # the application layer into HTTP
        ("service.app.refusals", "fastapi"),
        ("service.app.views.jobs", "starlette.concurrency"),
        ("service.app.views.jobs", "service.api.deps"),  # up to the routes that call it
        ("service.app.usecases.cancel", "service.worker.job_store"),
        ("service.shared.queue", "service.app.usecases.dispatch"),  # shared up to the layer
        ("service.shared.queue", "service.web.errors"),  # shared reaching into HTTP
        ("service.worker.execution", "service.web.auth"),
        ("service.api.jobs", "service.client.http"),  # sideways, into the light client
        ("service.dashboard.pages", "service.entry.app"),
        ("tuning.hardware.peak", "tuning.search.spaces"),  # the machine up to the search
        ("tuning.publish.verify", "tuning.measure.kernel_jail"),
        ("tuning.jail.isolated", "tuning.untrusted.requests"),  # the machinery to what it runs
        ("tuning.catalog.conv", "tuning.models.inputs"),  # sideways on one floor
        ("tuning.jail.spawn", "tuning.ir"),  # the jail needs nothing of TVM
    ],
)
def test_an_arrow_back_up_is_a_violation(module: str, target: str) -> None:
    imp = Import(module, ROOT / "x.py", 1, target, function_level=True, type_checking=False)
    assert violations([imp])


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("service.web.refused", "service.app.refusals"),  # HTTP maps the app's refusals
        ("service.api.jobs", "service.app.usecases.cancel"),
        ("service.dashboard.pages", "service.app.views.jobs"),
        ("service.entry.reaper", "service.app.usecases.dispatch"),
        ("service.worker.model_budget", "service.app.usecases.cancel"),
        ("service.worker.bootstrap", "service.app.admission"),
    ],
)
def test_the_application_layer_is_called_by_http_the_entries_and_the_worker(
    module: str, target: str
) -> None:
    imp = Import(module, ROOT / "x.py", 1, target, function_level=False, type_checking=False)
    assert not violations([imp])


def test_the_walk_sees_function_level_type_checking_and_relative_imports(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n"
        "    from ..other import Thing\n"
        "def f():\n"
        "    import deep.module\n"
    )
    path = tmp_path / "mod.py"
    path.write_text(source)
    known = {"pkg.sub.sibling": path}
    found = {
        (i.target, i.function_level, i.type_checking): i.line
        for i in imports_of("pkg.sub.mod", path, known)
    }
    assert found == {
        ("typing", False, False): 1,
        ("pkg.sub.sibling", False, False): 2,
        ("pkg.other", False, True): 4,
        ("deep.module", True, False): 6,
    }


if __name__ == "__main__":
    every = all_imports()
    for (source, target), (count, later) in arrows(every).items():
        print(f"{source} -> {target}: {count}" + (f" ({later} deferred)" if later else ""))
    for line in violations(every):
        print("VIOLATION", line)
    for cycle in cycles(internal_graph(every)):
        print("CYCLE", describe(cycle))
