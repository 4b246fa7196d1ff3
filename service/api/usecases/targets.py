"""Naming a target: ``"host"``, a JSON target, or the key or label of a stored one.

Shared by job creation and import (a target in a request body: `resolve_job_target`,
`record_target`) and by the reads that filter by target (a query parameter: `target_id_of`).
"""

from __future__ import annotations

import json
from typing import Any

from schedules_db import Store
from schedules_db.keys import target_key
from schedules_db.values import Target
from service.errors import invalid
from tuning.hardware.targets import (
    HOST,
    ResolvedTarget,
    TargetError,
    host_fingerprint,
    resolve_target,
)


def resolve_job_target(spec: str | dict[str, Any], store: Store) -> ResolvedTarget:
    """ "host", a JSON target, or the key or label of a target the store knows (as
    ``GET /targets`` lists them, e.g. ``znver4-2c``; a label names one target).

    A target tunehub refuses (`resolve_target`; a stored one too) is a 422 ``invalid_target``
    at ``body.target``, inside a JSON object at the offending attribute (``body.target.mcpu``).
    """
    named = None
    if isinstance(spec, str) and spec != HOST and not spec.lstrip().startswith("{"):
        named = store.catalog.find_target(spec)
    try:
        return resolve_target(json.loads(named.canonical_json) if named else spec)
    except TargetError as err:
        loc = ("body", "target", *err.loc) if isinstance(spec, dict) else ("body", "target")
        reason = str(err)
        if isinstance(spec, str) and named is None:
            known = (
                ", ".join(sorted(row.label for row in store.catalog.list_targets())) or "none yet"
            )
            reason = f"{err} (known target names: {known})"
        raise invalid(loc, reason, "invalid_target", spec) from None


def record_target(store: Store, spec: str | dict[str, Any], target: ResolvedTarget) -> Target:
    """The stored target of ``target`` (created on first use); named ``"host"`` in ``spec``, it
    is recorded with this machine's hardware fingerprint."""
    fingerprint = host_fingerprint() if spec == HOST else {}
    return store.catalog.get_or_create_target(
        target.canonical, target.kind, target.label, fingerprint
    )


def target_id_of(store: Store, target: str) -> int | None:
    """The id of the target a query parameter names by key, label, "host" or JSON; None if the
    store does not know it. A target tunehub refuses is a 422 at ``query.target``."""
    found = store.catalog.find_target(target)
    if found is None:
        try:
            resolved = resolve_target(target)
        except TargetError as err:
            raise invalid(("query", "target"), str(err), "invalid_target", target) from None
        found = store.catalog.find_target(target_key(resolved.canonical))
    return None if found is None else found.id
