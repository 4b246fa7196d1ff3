"""`tunehub artifacts migrate` and `tunehub artifacts gc`: maintenance of the artifact store,
run on a host that reaches the database."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from service.shared.settings import Settings


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    data_options: Callable[[argparse.ArgumentParser], None],
    settings_of: Callable[[argparse.Namespace], Settings],
) -> None:
    """Add `artifacts migrate` and `artifacts gc` to the `tunehub` parser."""
    artifacts = sub.add_parser(
        "artifacts", help="move artifacts into the database, collect garbage"
    )
    actions = artifacts.add_subparsers(dest="artifacts_command", required=True)

    p = actions.add_parser(
        "migrate",
        help="copy an artifact directory into the database store (verified; safe to rerun)",
    )
    data_options(p)
    p.add_argument("--from", dest="source", help="the directory (default: the artifact dir)")
    p.set_defaults(func=lambda args: migrate(settings_of(args), args.source))

    p = actions.add_parser("gc", help="remove artifacts no schedule, model or cost model uses")
    data_options(p)
    p.add_argument("--grace-s", type=float, help="spare what is younger (default: gc_grace_s)")
    p.set_defaults(func=lambda args: collect(settings_of(args), args.grace_s))


def migrate(settings: Settings, source: str | None) -> int:
    """Copy every artifact row's file and every cost model of the directory into the database
    (each verified against its sha256); 0 when all of them are there afterwards, 1 when a file
    is missing or damaged (named on stderr; the rest is copied)."""
    from schedules_db import Store, make_engine, upgrade_schema
    from schedules_db.blobs import DatabaseBlobs, file_sha256
    from schedules_db.store.cost_models import CostModel
    from tuning.search.cost_model import trained_on  # the models' file names (no TVM import)

    folder = Path(source).resolve() if source else settings.artifacts
    engine = make_engine(settings.store_url)
    upgrade_schema(engine)
    store, database = Store(engine), DatabaseBlobs(engine)
    copied = present = bad = 0
    for artifact in store.schedules.all_artifacts():
        if database.has(artifact):
            present += 1
            continue
        path = folder / artifact.path
        if not path.is_file() or file_sha256(path) != artifact.sha256:
            why = "missing" if not path.is_file() else "damaged (sha256 differs)"
            print(f"tunehub: artifact {artifact.sha256} ({path}): {why}", file=sys.stderr)
            bad += 1
            continue
        database.put(path)
        copied += 1
    models = 0
    for path in sorted(folder.glob("cost_models/*/records-*.tar")):
        records = trained_on(path)
        if records is not None:
            stored = database.put(path, ".tar")
            key = path.parent.name
            store.cost_models.add(CostModel(key, records, stored.sha256, stored.size, stored.path))
            models += 1
    print(
        f"tunehub: {copied} artifact(s) copied from {folder} into the database, {present} "
        f"already there, {bad} missing or damaged; {models} cost model(s) indexed. Serve with "
        "TUNEHUB_ARTIFACT_STORE=database.",
        flush=True,
    )
    engine.dispose()
    return 1 if bad else 0


def collect(settings: Settings, grace_s: float | None) -> int:
    """One garbage collection of the configured artifact store; prints what it removed."""
    from schedules_db import make_engine, upgrade_schema
    from schedules_db.blobs import collect_garbage
    from service.shared.artifact_files import open_blob_store

    engine = make_engine(settings.store_url)
    upgrade_schema(engine)
    grace = timedelta(seconds=settings.gc_grace_s if grace_s is None else grace_s)
    done = collect_garbage(engine, open_blob_store(settings, engine), grace)
    print(
        f"tunehub: removed {done.artifact_rows} unused artifact row(s), {done.cost_models} old "
        f"cost model(s), {done.blobs} blob(s) from the {settings.blob_store} store",
        flush=True,
    )
    engine.dispose()
    return 0
