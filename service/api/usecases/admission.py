"""What every submission (a job, a model) checks first, before anything is parsed or written:
the caller's active-job cap, the trial budget's cap, and the target."""

from __future__ import annotations

from typing import Any

from schedules_db import Store
from service.api.usecases.target_names import resolve_job_target
from service.app.actors import Identity
from service.shared.settings import Settings
from service.web.auth import check_target
from service.web.errors import invalid
from service.web.quotas import check_active_jobs
from tuning.hardware.targets import ResolvedTarget


def admitted_target(
    store: Store, settings: Settings, who: Identity, trials: int, target: str | dict[str, Any]
) -> ResolvedTarget:
    """The resolved ``target`` of a submission by ``who`` of ``trials``; refused, in this
    order: ``who`` at its cap of queued and running jobs (429); ``trials`` over
    ``settings.max_trials``, a target tunehub refuses, or one no worker registered without
    ``admin`` (422)."""
    check_active_jobs(store.jobs.count_unfinished(who.name), settings.max_active_jobs)
    if trials > settings.max_trials:
        raise invalid(
            ("body", "trials"),
            f"trials must be at most {settings.max_trials}",
            "less_than_equal",
            trials,
        )
    resolved = resolve_job_target(target, store)
    check_target(who, resolved.canonical, store)
    return resolved
