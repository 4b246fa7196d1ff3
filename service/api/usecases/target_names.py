"""Naming a target in a request: ``"host"``, a JSON target, or the key or label of a stored one
(`service.shared.targets`, which the worker's bootstrap shares), with a refusal as a 422.

Used by job creation and import (a target in a request body: `resolve_job_target`, then
`service.shared.targets.record_target`) and by the reads that filter by target (a query parameter:
`target_id_of`).
"""

from __future__ import annotations

from typing import Any

from schedules_db import Store
from schedules_db.keys import target_key
from service.shared.targets import find_named_target, is_name, resolve_named
from service.web.errors import invalid
from tuning.hardware.targets import ResolvedTarget, TargetError, resolve_target


def resolve_job_target(spec: str | dict[str, Any], store: Store) -> ResolvedTarget:
    """ "host", a JSON target, or the key or label of a target the store knows (as
    ``GET /targets`` lists them, e.g. ``znver4-2c``; a label names one target).

    A target tunehub refuses (`resolve_target`; a stored one too) is a 422 ``invalid_target``
    at ``body.target``, inside a JSON object at the offending attribute (``body.target.mcpu``).
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
        raise invalid(loc, reason, "invalid_target", spec) from None


def target_id_of(store: Store, target: str) -> int | None:
    """The id of the target a query parameter names by key, label, "host" or JSON; None if the
    store does not know it (a name it has no target of included: the caller's 404 or empty
    answer). A "host" or JSON target tunehub refuses is a 422 at ``query.target``."""
    found = store.catalog.find_target(target)
    if found is None and is_name(target):
        return None
    if found is None:
        try:
            resolved = resolve_target(target)
        except TargetError as err:
            raise invalid(("query", "target"), str(err), "invalid_target", target) from None
        found = store.catalog.find_target(target_key(resolved.canonical))
    return None if found is None else found.id
