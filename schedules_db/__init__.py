"""The tunehub store: SQLAlchemy models, engine setup, migrations and the store API.

This package imports neither FastAPI nor Celery. `service.worker.store_database` (the MetaSchedule
`Database` adapter) is the only module that imports TVM, and nothing here imports it eagerly.
"""

from schedules_db.engine import make_engine, upgrade_schema
from schedules_db.store import Store
from schedules_db.values import JobState

__all__ = ["JobState", "Store", "make_engine", "upgrade_schema"]
