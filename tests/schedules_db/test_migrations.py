"""The Alembic migrations build exactly the schema the models describe (SQLite and PostgreSQL),
so a model change without its migration fails here, not in production."""

from __future__ import annotations

import multiprocessing

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from schedules_db import make_engine, upgrade_schema
from schedules_db.models import Base


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
