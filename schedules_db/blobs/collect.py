"""Garbage collection of the artifact store: what no row refers to any more goes.

Run by the API replica that holds the reaper lease (`service.entry.reaper`, every
``gc_every_s``) and by ``tunehub artifacts gc``. Three steps, each sparing anything younger than
``grace`` (a worker stores a blob before the row that refers to it, so a fresh unreferenced blob
may be a publish under way):

1. artifact rows no schedule and no model refers to (a schedule replaced by a faster one);
2. cost-model rows past the newest `KEEP_COST_MODELS` of their target;
3. blobs no artifact row and no cost-model row names.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, delete, select, union

from schedules_db.blobs.base import BlobStore
from schedules_db.tables import ArtifactRow, CostModelRow, ModelRow, ScheduleRow, utcnow

KEEP_COST_MODELS = 2  # per target: the newest, and the one a running search may still read


@dataclass(frozen=True)
class Collected:
    """What one collection removed."""

    artifact_rows: int
    cost_models: int
    blobs: int


def collect_garbage(engine: Engine, blobs: BlobStore, grace: timedelta) -> Collected:
    """Remove unreferenced artifact rows, old cost models and unreferenced blobs older than
    ``grace`` (see the module docstring); what was removed."""
    cutoff = utcnow() - grace
    with engine.begin() as conn:
        used = union(
            select(ScheduleRow.artifact_id),
            select(ModelRow.source_artifact_id),
            select(ModelRow.artifact_id).where(ModelRow.artifact_id.is_not(None)),
        ).subquery()
        artifacts = conn.execute(
            delete(ArtifactRow).where(
                ArtifactRow.id.not_in(select(used.c[0])), ArtifactRow.created_at < cutoff
            )
        ).rowcount
        old_models = []
        rows = conn.execute(
            select(CostModelRow.id, CostModelRow.target_key, CostModelRow.created_at).order_by(
                CostModelRow.target_key, CostModelRow.records.desc()
            )
        ).all()
        kept: dict[str, int] = {}
        for model_id, key, created in rows:
            kept[key] = kept.get(key, 0) + 1
            if kept[key] > KEEP_COST_MODELS and _aware(created) < cutoff:
                old_models.append(model_id)
        if old_models:
            conn.execute(delete(CostModelRow).where(CostModelRow.id.in_(old_models)))
        named = set(conn.execute(select(ArtifactRow.sha256)).scalars())
        named |= set(conn.execute(select(CostModelRow.sha256)).scalars())
    removed = 0
    for blob in list(blobs.stored()):
        if blob.sha256 not in named and _aware(blob.created_at) < cutoff:
            blobs.delete(blob)
            removed += 1
    return Collected(artifacts, len(old_models), removed)


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes: every stored time is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
