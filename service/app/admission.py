"""Target naming and admission, in one module: naming a target as every part of the service
does (``"host"``, a JSON target, an object or its text, or the key or label of a target the
store knows, as ``GET /targets`` lists them) and recording it in the store; and what every
submission (a job, a model, a build's tasks, an import) checks first, before anything is parsed
or written.

Shared by the API's use cases, the dashboard and the worker's bootstrap
(`service.worker.bootstrap`): no HTTP in it. A target refused is an
`service.app.refusals.InvalidInput` at ``body.target`` (a request body: `resolve_job_target`)
or ``query.target`` (a query parameter: `target_id_of`, `query_target`). Admission
(`admitted_target`) refuses, in this order: the caller at its cap of active jobs (`TooMany`,
a 429), trials over the cap, a target tunehub refuses, a target no worker registered without
``admin`` (each an `InvalidInput`, a 422). The TVM side of a target is
`tuning.hardware.targets`.

Every use case that makes jobs for a caller (a job, a model's tasks, a build's tasks, an
import's verification jobs) checks their trials with `check_trials` and makes them inside
`admitting`: under the caller's admission lock, refused unless the caller has room for all of
them (`check_room`), so no path gets around the cap or the trial limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from schedules_db import Store
from schedules_db.keys import target_key
from schedules_db.tokens import ADMIN
from schedules_db.values import Target
from service.app.actors import Identity
from service.app.ports import AdmissionLocks
from service.app.refusals import InvalidInput, TooMany
from service.shared.settings import Settings
from tuning.hardware.host import host_fingerprint
from tuning.hardware.targets import HOST, ResolvedTarget, TargetError, resolve_target


def is_name(spec: str | dict[str, Any]) -> bool:
    """True when ``spec`` names a stored target (a key or label), not "host" or JSON."""
    return isinstance(spec, str) and spec != HOST and not spec.lstrip().startswith("{")


def find_named_target(spec: str | dict[str, Any], store: Store) -> Target | None:
    """The stored target ``spec`` names by key or label; None when ``spec`` is ``"host"``, a
    JSON target, or a name the store does not know."""
    return store.catalog.find_target(spec) if isinstance(spec, str) and is_name(spec) else None


def resolve_named(spec: str | dict[str, Any], named: Target | None) -> ResolvedTarget:
    """The target ``spec`` stands for: the stored target ``named`` (`find_named_target`) when
    there is one, else ``spec`` itself. Raises `tuning.hardware.targets.TargetError` for a
    target tunehub refuses."""
    return resolve_target(json.loads(named.canonical_json) if named else spec)


def record_target(
    store: Store,
    spec: str | dict[str, Any],
    target: ResolvedTarget,
    host: dict[str, Any] | None = None,
) -> Target:
    """The stored target of ``target`` (created on first use); named ``"host"`` in ``spec``, it
    is recorded with this machine's hardware fingerprint (``host``, or read here)."""
    fingerprint = (host if host is not None else host_fingerprint()) if spec == HOST else {}
    return store.catalog.get_or_create_target(
        target.canonical, target.kind, target.label, fingerprint
    )


def resolve_job_target(spec: str | dict[str, Any], store: Store) -> ResolvedTarget:
    """ "host", a JSON target, or the key or label of a target the store knows (as
    ``GET /targets`` lists them, e.g. ``znver4-2c``; a label names one target).

    A target tunehub refuses (`resolve_target`; a stored one too) is an `InvalidInput`
    ``invalid_target`` at ``body.target``, inside a JSON object at the offending attribute
    (``body.target.mcpu``).
    """
    named = find_named_target(spec, store)
    try:
        return resolve_named(spec, named)
    except TargetError as err:
        loc = ("body", "target", *err.loc) if isinstance(spec, dict) else ("body", "target")
        reason = str(err)
        if isinstance(spec, str) and named is None:
            known = (
                ", ".join(sorted(row.label for row in store.catalog.list_targets())) or "none yet"
            )
            reason = f"{err} (known target names: {known})"
        raise InvalidInput(loc, reason, "invalid_target", spec) from None


def target_id_of(store: Store, target: str) -> int | None:
    """The id of the target a query parameter names by key, label, "host" or JSON; None if the
    store does not know it (a name it has no target of included: the caller's 404 or empty
    answer). A "host" or JSON target tunehub refuses is an `InvalidInput` at ``query.target``."""
    found = store.catalog.find_target(target)
    if found is None and is_name(target):
        return None
    if found is None:
        try:
            resolved = resolve_target(target)
        except TargetError as err:
            raise InvalidInput(("query", "target"), str(err), "invalid_target", target) from None
        found = store.catalog.find_target(target_key(resolved.canonical))
    return None if found is None else found.id


def query_target(store: Store, spec: str) -> tuple[str | None, Target | None]:
    """(key, stored target or None) of a target named in a query, (None, None) for a name no
    stored target has; an `InvalidInput` at ``query.target`` for a "host" or JSON target
    tunehub refuses."""
    named = find_named_target(spec, store)
    if named is not None:
        return named.key, named
    if is_name(spec):  # a name the store has no target of: nothing is tuned for it
        return None, None
    try:
        resolved = resolve_target(spec)
    except TargetError as err:
        raise InvalidInput(("query", "target"), str(err), "invalid_target", spec) from None
    key = target_key(resolved.canonical)
    return key, store.catalog.find_target(key)


def lookup_target(store: Store, spec: str | dict[str, Any]) -> tuple[str, Target | None]:
    """(key, stored target or None) of the target a lookup names: a stored key or label is that
    target; "host" or JSON is resolved as for a job (`resolve_job_target`), stored or not."""
    stored = find_named_target(spec, store)  # a stored key or label: that target
    if stored is None:
        key = target_key(resolve_job_target(spec, store).canonical)
        return key, store.catalog.find_target(key)
    return stored.key, stored


def check_target(identity: Identity, canonical: dict[str, Any], store: Store) -> None:
    """A job (or import) for a target no worker has registered needs ``admin``; others get an
    `InvalidInput` at ``("body", "target")`` listing the targets workers did register."""
    if identity.can(ADMIN):
        return
    registered = store.fleet.registered_target_ids()
    row = store.catalog.find_target(target_key(canonical))
    if row is not None and row.id in registered:
        return
    known = [t for t in store.catalog.list_targets() if t.id in registered]
    names = ", ".join(f"{t.label} ({t.key})" for t in known) or "none yet"
    raise InvalidInput(
        ("body", "target"),
        f"no worker has registered this target; known targets: {names} "
        "(a target without workers needs the 'admin' scope)",
        "unknown_target",
        [t.label for t in known],
    )


ACTIVE_JOBS_RETRY_S = 30  # what a client at its job cap is told to wait


def check_active_jobs(active: int, limit: int, asked: int = 1) -> None:
    """`TooMany` (a 429) for an identity that already has ``active`` queued or running jobs,
    when ``asked`` more would take it over ``limit`` (0: no cap)."""
    if limit > 0 and active + asked - 1 >= limit:
        more = "" if asked == 1 else f" and this would add {asked}"
        raise TooMany(
            f"{active} of your jobs are queued or running{more}; at most {limit} may be "
            f"(wait for some to finish or cancel some)",
            "too_many_jobs",
            ACTIVE_JOBS_RETRY_S,
        )


def check_room(store: Store, settings: Settings, who: Identity, jobs: int = 1) -> None:
    """`TooMany` (a 429) unless ``who``'s queued and running jobs leave room under
    ``settings.max_active_jobs`` for ``jobs`` more (all of them, or the submission is refused
    whole); nothing to check for none."""
    if jobs > 0:
        check_active_jobs(store.jobs.count_unfinished(who.name), settings.max_active_jobs, jobs)


def check_trials(
    settings: Settings,
    trials: int,
    loc: Sequence[str | int] = ("body", "trials"),
    subject: str = "trials",
) -> None:
    """An `InvalidInput` ``less_than_equal`` at ``loc`` (a 422) when a job would ask for
    ``trials`` over ``settings.max_trials``; ``subject`` names them in the message (a job
    body's own field by default)."""
    if trials > settings.max_trials:
        raise InvalidInput(
            loc, f"{subject} must be at most {settings.max_trials}", "less_than_equal", trials
        )


@contextmanager
def admitting(
    store: Store, settings: Settings, locks: AdmissionLocks, who: Identity, jobs: int = 1
) -> Iterator[None]:
    """Hold ``who``'s admission lock (on every replica) and refuse (`check_room`) unless
    ``who`` has room for ``jobs`` more; the caller makes them inside, so two submissions
    cannot both take the cap's last places."""
    with locks.admitting(who.name):
        check_room(store, settings, who, jobs)
        yield


def admitted_target(
    store: Store, settings: Settings, who: Identity, trials: int, target: str | dict[str, Any]
) -> ResolvedTarget:
    """The resolved ``target`` of a submission by ``who`` of ``trials``; refused, in this
    order: ``who`` at its cap of queued and running jobs (`TooMany`); ``trials`` over
    ``settings.max_trials``, a target tunehub refuses, or one no worker registered without
    ``admin`` (`InvalidInput`). Checked before anything is parsed; the jobs are made in
    `admitting`, which counts again."""
    check_room(store, settings, who)
    check_trials(settings, trials)
    resolved = resolve_job_target(target, store)
    check_target(who, resolved.canonical, store)
    return resolved
