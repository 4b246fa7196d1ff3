"""The tunehub store: persistence only. SQLAlchemy models, engine setup, migrations, the store
split by aggregate (`schedules_db.store`), its typed values (`schedules_db.values`), the API's
joined reads (`schedules_db.lookups`), API tokens, and the SQL implementation of the build
side's read interface (`schedules_db.reader`, over `schedule_reads`).

Nothing here imports TVM, FastAPI, Celery or `tuning`/`service`: the MetaSchedule `Database`
adapter over the store lives in the worker package (`service.worker.store_database`).
"""

from schedules_db.engine import make_engine, upgrade_schema
from schedules_db.store import Store
from schedules_db.values import JobState

__all__ = ["JobState", "Store", "make_engine", "upgrade_schema"]
