"""The Alembic migrations build exactly the schema the models describe (SQLite and PostgreSQL),
so a model change without its migration fails here, not in production."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from schedules_db import make_engine, upgrade_schema
from schedules_db.models import Base


def test_migrations_match_the_models(store_url: str) -> None:
    engine = make_engine(store_url)
    upgrade_schema(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == [], diff
