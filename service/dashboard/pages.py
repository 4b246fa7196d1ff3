"""The dashboard's pages: server-rendered HTML over the same store reads and views as the JSON
API (`schedules_db.browse`, `schedules_db.lookups`, `service.app.views`), so a page and the
API never disagree. Tables, filters, sorting and paging work without script (plain GET forms
and links: the filter state is the URL); small scripts in ``static/`` draw the plots and
follow running jobs over the API (`service.dashboard.templates`)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from schedules_db import Store, browse, lookups
from schedules_db.browse import ScheduleFilter
from schedules_db.tables import utcnow
from schedules_db.tokens import ADMIN, SCOPES, SUBMIT, SUBMIT_CODE
from schedules_db.values import FINAL_STATES, JobState
from service.api.deps import ServicesDep
from service.app.actors import Identity
from service.app.admission import target_id_of
from service.app.responses.schedules import schedule_json
from service.app.usecases.cancel import may_cancel
from service.app.views.fleet import workers_view
from service.app.views.jobs import job_with_parts, live_target_ids
from service.app.views.models import model_view
from service.dashboard.formatting import FILTERS
from service.dashboard.highlight import highlight_json, highlight_python
from service.web.auth import viewer
from service.web.errors import not_found
from service.web.schemas import RowId
from service.web.sessions import csrf_token, session_of
from service.web.strict_input import StrictRoute
from tuning.catalog.dtypes import TOLERANCE_RULES

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
templates.env.filters.update(FILTERS)
router = APIRouter(include_in_schema=False, route_class=StrictRoute)
PAGE_ROWS = 50
MODEL_FINAL = ("succeeded", "failed", "cancelled")


CHOICES_TTL_S = 30.0
_choices: dict[str, tuple[float, dict[str, list[str]]]] = {}


def filter_choices(store: Store) -> dict[str, list[str]]:
    """The filter menus' values (`schedules_db.browse.distinct_values`), read at most every
    `CHOICES_TTL_S` per store: five DISTINCT scans cost 40 ms with 100,000 schedules."""
    key, now = str(store.engine.url), time.monotonic()
    cached = _choices.get(key)
    if cached is None or now - cached[0] > CHOICES_TTL_S:
        cached = _choices[key] = (now, browse.distinct_values(store))
    return cached[1]


def local_path(url: str) -> bool:
    """True for a path on this site ("/jobs?state=failed"), never a URL a browser would take
    to another host ("//evil.example", "/\\evil.example", "https://...")."""
    if any(ch <= " " or ch == "\x7f" for ch in url):  # browsers drop tabs and newlines
        return False
    return url.startswith("/") and not url.startswith(("//", "/\\")) and "\\" not in url


def page_viewer(request: Request) -> Identity:
    """Dependency: who the page is for; without one (auth on, no session, no anonymous
    reads) a 303 to the login page, which sends the browser back here after."""
    found = viewer(request)
    if found is None:
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise HTTPException(303, headers={"Location": f"/login?next={quote(here, safe='/')}"})
    return found


Viewer = Annotated[Identity, Depends(page_viewer)]


def render(request: Request, who: Identity, name: str, **context: Any) -> HTMLResponse:
    """Render template ``name`` with what every page shows: who is looking, what they may do,
    and the session's CSRF token for the page's scripts."""
    session = session_of(request)
    services = request.app.state.services
    return templates.TemplateResponse(
        request,
        name,
        {
            "who": who,
            "auth": services.settings.auth,
            "scopes": [s for s in SCOPES if who.can(s)],
            "can_submit": who.can(SUBMIT),
            "can_submit_code": who.can(SUBMIT_CODE),
            "is_admin": who.can(ADMIN),
            "csrf": csrf_token(session) if session else "",
            **context,
        },
    )


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, who: Viewer, services: ServicesDep) -> HTMLResponse:
    """Counts, recent jobs, the fastest schedules per target."""
    store, settings = services.store, services.settings
    since = utcnow() - timedelta(seconds=settings.stale_after_s)
    counts = browse.counts(store, since)
    live = live_target_ids(store, settings)
    recent = browse.job_page(store, limit=10)
    fastest = browse.fastest_per_target(store)
    targets = {t.id: t for t in store.catalog.list_targets()}
    return render(
        request,
        who,
        "overview.html",
        counts=counts,
        jobs=[job_with_parts(store, settings, *parts, live) for parts in recent.rows],
        fastest=[
            (targets[target_id], [schedule_json(*parts) for parts in rows])
            for target_id, rows in fastest.items()
        ],
    )


ScheduleSort = Literal["date", "gflops", "latency", "speedup", "peak", "trials", "id"]


@router.get("/schedules", response_class=HTMLResponse)
def schedules(
    request: Request,
    who: Viewer,
    services: ServicesDep,
    operator: Annotated[str | None, Query(max_length=64)] = None,
    target: Annotated[str | None, Query(max_length=4096)] = None,
    layout: Annotated[str | None, Query(max_length=16)] = None,
    dtype: Annotated[str | None, Query(max_length=16)] = None,
    space: Annotated[str | None, Query(max_length=16)] = None,
    origin: Annotated[Literal["catalog", "user", ""] | None, Query()] = None,
    sort: ScheduleSort = "date",
    order: Literal["asc", "desc"] = "desc",
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> HTMLResponse:
    """The schedules table: filters, sort and page are the URL's query."""
    store = services.store
    filters = {
        "operator": operator or None,
        "target": target or None,
        "layout": layout or None,
        "dtype": dtype or None,
        "space": space or None,
        "origin": origin or None,
    }
    target_id = target_id_of(store, filters["target"]) if filters["target"] else None
    if filters["target"] and target_id is None:
        page: browse.Page[lookups.ScheduleParts] = browse.Page([], 0, offset, PAGE_ROWS)
    else:
        where = ScheduleFilter(
            filters["operator"], target_id, None, filters["layout"], filters["dtype"],
            filters["space"], filters["origin"],
        )  # fmt: skip
        page = browse.schedule_page(store, where, sort, order == "desc", offset, PAGE_ROWS)
    return render(
        request,
        who,
        "schedules.html",
        rows=[schedule_json(*parts) for parts in page.rows],
        page=page,
        filters=filters,
        sort=sort,
        order=order,
        choices=filter_choices(store),
        targets=store.catalog.list_targets(),
    )


@router.get("/schedules/{schedule_id}", response_class=HTMLResponse)
def schedule(
    schedule_id: RowId,
    request: Request,
    who: Viewer,
    services: ServicesDep,
) -> HTMLResponse:
    """One schedule: figures, verification, trace and TIR, its curve, the other targets."""
    store = services.store
    parts = lookups.schedule(store, schedule_id)
    if parts is None:
        raise not_found("schedule", schedule_id)
    shown = schedule_json(*parts)
    trace = json.dumps(json.loads(parts.record.trace_json), indent=1) if parts.record else ""
    others = [schedule_json(*o) for o in browse.other_targets(store, parts.workload.id)]
    return render(
        request,
        who,
        "schedule.html",
        s=shown,
        origin=parts.workload.origin,
        fingerprint=parts.target.fingerprint,
        canonical=parts.target.canonical_json,
        tir_html=highlight_python(parts.schedule.tir),
        trace_html=highlight_json(trace) if trace else None,
        tolerance_rule=TOLERANCE_RULES,
        others=others,
    )


@router.get("/compare", response_class=HTMLResponse)
def compare(request: Request, who: Viewer, services: ServicesDep) -> HTMLResponse:
    """Workload compare: one operator's schedules across shapes and targets (drawn by
    ``compare.js`` from ``GET /api/v1/schedules``)."""
    return render(
        request, who, "compare.html", operators=filter_choices(services.store)["operator"]
    )


@router.get("/jobs", response_class=HTMLResponse)
def jobs(
    request: Request,
    who: Viewer,
    services: ServicesDep,
    state: JobState | None = None,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> HTMLResponse:
    """Jobs, newest first, by state."""
    store, settings = services.store, services.settings
    page = browse.job_page(store, state.value if state else None, offset=offset, limit=PAGE_ROWS)
    live = live_target_ids(store, settings)
    models = [model_view(store, m, with_tasks=False) for m in store.models.list_models(10)]
    return render(
        request,
        who,
        "jobs.html",
        models=models,
        rows=[job_with_parts(store, settings, *parts, live) for parts in page.rows],
        page=page,
        state=state.value if state else None,
        states=[s.value for s in JobState],
    )


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job(
    job_id: RowId,
    request: Request,
    who: Viewer,
    services: ServicesDep,
) -> HTMLResponse:
    """One job: its progress live (``job.js`` over the job's events), cancel, its error."""
    store, settings = services.store, services.settings
    parts = lookups.job(store, job_id)
    if parts is None:
        raise not_found("job", job_id)
    shown = job_with_parts(store, settings, *parts)
    final = shown["state"] in FINAL_STATES
    return render(
        request,
        who,
        "job.html",
        j=shown,
        final=final,
        may_cancel=may_cancel(who, parts.job),
    )


@router.get("/models/{model_id}", response_class=HTMLResponse)
def model(model_id: RowId, request: Request, who: Viewer, services: ServicesDep) -> HTMLResponse:
    """A whole-model job: its tasks, each with its job's progress (``model.js`` refreshes them
    from ``GET /api/v1/models/{id}`` until the model is final)."""
    found = services.store.models.get(model_id)
    if found is None:
        raise not_found("model", model_id)
    shown = model_view(services.store, found)
    return render(request, who, "model.html", m=shown, final=shown["state"] in MODEL_FINAL)


@router.get("/workers", response_class=HTMLResponse)
def workers(request: Request, who: Viewer, services: ServicesDep) -> HTMLResponse:
    """The worker fleet: live, stale, stopped."""
    return render(
        request, who, "workers.html", workers=workers_view(services.store, services.settings)
    )


@router.get("/submit", response_class=HTMLResponse)
def submit(request: Request, who: Viewer) -> HTMLResponse:
    """The job form (built by ``submit.js`` from ``GET /api/v1/operators``)."""
    return render(request, who, "submit.html")


@router.get("/login", response_class=HTMLResponse)
def login(request: Request, next: Annotated[str, Query(max_length=512)] = "/") -> HTMLResponse:
    """The token prompt (``login.js`` exchanges the token for a session cookie)."""
    target = next if local_path(next) else "/"
    who = viewer(request)
    return render(
        request,
        who or Identity("", frozenset(), ""),
        "login.html",
        next=target,
        logged_in=who is not None and who.token is not None,
    )
