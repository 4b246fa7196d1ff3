"""Alembic environment: runs on the connection handed in by `schedules_db.engine.upgrade_schema`."""

from alembic import context

from schedules_db.tables import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reached when alembic is driven by hand
    from schedules_db.engine import make_engine

    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("run alembic with a connection or with sqlalchemy.url set")
    connection = make_engine(url).connect()

context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
