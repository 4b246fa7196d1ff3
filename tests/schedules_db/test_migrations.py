"""The Alembic migrations build exactly the schema the models describe (SQLite and PostgreSQL),
so a model change without its migration fails here, not in production."""

from __future__ import annotations

import multiprocessing
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.tables import Base


def test_migrations_match_the_models(store_url: str) -> None:
    engine = make_engine(store_url)
    upgrade_schema(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == [], diff


def _upgrade_in_child(url: str, barrier) -> None:  # noqa: ANN001 - multiprocessing barrier
    engine = make_engine(url)
    barrier.wait()
    upgrade_schema(engine)
    engine.dispose()


def test_concurrent_upgrades_of_an_empty_database_all_succeed(store_url: str) -> None:
    """The API and every worker upgrade on start; started together they must not race
    (CI once saw two PostgreSQL processes both create ``alembic_version``)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    children = [
        context.Process(target=_upgrade_in_child, args=(store_url, barrier)) for _ in range(4)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
    assert [child.exitcode for child in children] == [0, 0, 0, 0]
    engine = make_engine(store_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        versions = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    engine.dispose()
    assert diff == [], diff
    assert len(versions) == 1


def test_0008_mends_duplicated_labels_then_makes_them_unique(store_url: str) -> None:
    """Before 0008 a target could take another's label (the issue's shadowing); upgrading keeps
    each label on its first target and gives the later ones their key's suffix."""
    engine = make_engine(store_url)
    upgrade_schema(engine, "0007")
    targets = sa.table(
        "targets",
        *(sa.column(name) for name in ("key", "canonical_json", "kind", "label")),
        sa.column("fingerprint", sa.JSON),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    rows = [  # (key, label), oldest first
        ("a" * 32, "znver4-2c"),
        ("b" * 32, "znver4-2c"),
        ("c" * 32, "znver4-2c"),  # its 8-digit suffix is taken by the next row
        ("d" * 32, "znver4-2c-cccccccc"),
        ("e" * 32, "cuda-sm_80"),
    ]
    with engine.begin() as conn:
        conn.execute(
            sa.insert(targets),
            [
                {
                    "key": key,
                    "canonical_json": "{}",
                    "kind": "llvm",
                    "label": label,
                    "fingerprint": {},
                    "created_at": datetime.now(timezone.utc),
                }
                for key, label in rows
            ],
        )
    upgrade_schema(engine)
    store = Store(engine)
    labels = {row.key[0]: row.label for row in store.catalog.list_targets()}
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert labels == {
        "a": "znver4-2c",
        "b": "znver4-2c-bbbbbbbb",
        "c": "znver4-2c-cccccccccccc",
        "d": "znver4-2c-cccccccc",
        "e": "cuda-sm_80",
    }
    assert diff == [], diff


def test_0007_upgrades_a_store_with_jobs_and_keys_raw_tir_as_user(store_url: str) -> None:
    """0007 rebuilds `workloads` (batch mode on SQLite): with a job referencing a workload, the
    copy-and-drop failed on SQLite's foreign keys. Rows without an operator become ``user``."""
    engine = make_engine(store_url)
    upgrade_schema(engine, "0006")
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO targets (id, key, canonical_json, kind, label, fingerprint, created_at) "
            "VALUES (1, 'k', '{}', 'llvm', 'l', '{}', CURRENT_TIMESTAMP)"
        ))  # fmt: skip
        for wid, operator in ((1, "'matmul'"), (2, "NULL")):
            conn.execute(text(
                "INSERT INTO workloads (id, shash, operator, params, mod_json, flop, created_at) "
                f"VALUES ({wid}, '{wid}', {operator}, '{{}}', '{{}}', 1, CURRENT_TIMESTAMP)"
            ))  # fmt: skip
            conn.execute(text(
                "INSERT INTO jobs (workload_id, target_id, trials, state, queue, attempt, "
                "cancel_requested, trials_done, cache_hit, priority, transfer_cost_model, "
                "created_at) "
                f"VALUES ({wid}, 1, 4, 'queued', 'q', 0, false, 0, false, 0, true, "
                "CURRENT_TIMESTAMP)"
            ))  # fmt: skip
    upgrade_schema(engine)
    with engine.connect() as conn:
        origins = conn.execute(text("SELECT id, origin FROM workloads ORDER BY id")).all()
        jobs = conn.execute(text("SELECT COUNT(*) FROM jobs")).scalar()
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert [tuple(row) for row in origins] == [(1, "catalog"), (2, "user")]
    assert jobs == 2 and diff == []
