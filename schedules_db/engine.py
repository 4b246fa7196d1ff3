"""Engine and session setup, and schema migrations (Alembic) applied on start."""

from __future__ import annotations

import fcntl
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import NullPool

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any fixed 64-bit number: the PostgreSQL advisory lock that serialises schema upgrades.
MIGRATION_LOCK_KEY = 0x74756E6568756201  # "tunehub" + 1


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:  # DBAPI objects: untyped
    cursor = dbapi_connection.cursor()
    # WAL lets the API read while a worker writes; busy_timeout waits instead of failing.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_engine(url: str) -> Engine:
    """Create an engine for a store URL (``sqlite:///...`` or ``postgresql+psycopg://...``).

    SQLite files get WAL mode, a 30 s busy timeout and foreign keys; the parent folder is created.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(url, pool_size=5, max_overflow=10)
    _ping_when_idle(engine)
    return engine


PROBE_APPLICATION = "tunehub-probe"  # the probes' application_name on PostgreSQL


def make_probe_engine(url: str, connect_timeout_s: float, statement_timeout_s: float) -> Engine:
    """An engine for reads that must not hang nor hold anything (the metrics' probes): no pool
    (each connection is closed when released, so an abandoned read holds one connection at
    most, never a pooled one), connecting within ``connect_timeout_s`` and each statement
    interrupted past ``statement_timeout_s``.

    PostgreSQL: libpq's ``connect_timeout`` (whole seconds, 2 at least) and the session's
    ``statement_timeout``, as application ``tunehub-probe`` unless the URL names one. SQLite:
    a lock is waited for ``connect_timeout_s``, and a statement running past
    ``statement_timeout_s`` is interrupted (sqlite3's progress handler); its journal mode
    is left as the store set it.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            poolclass=NullPool,
            connect_args={"check_same_thread": False, "timeout": connect_timeout_s},
        )

        @event.listens_for(engine, "before_cursor_execute")
        def bounded(
            _conn: Any, cursor: Any, _sql: Any, _params: Any, _context: Any, _many: Any
        ) -> None:
            deadline = time.monotonic() + statement_timeout_s
            cursor.connection.set_progress_handler(lambda: time.monotonic() > deadline, 1000)

        return engine
    timeout = f"-c statement_timeout={max(1, round(statement_timeout_s * 1000))}"
    given = parsed.query.get("options")  # the URL's own options are kept
    options = f"{given} {timeout}" if isinstance(given, str) else timeout
    connect_args: dict[str, Any] = {
        "connect_timeout": max(2, math.ceil(connect_timeout_s)),
        "options": options,
    }
    if "application_name" not in parsed.query:
        connect_args["application_name"] = PROBE_APPLICATION
    return create_engine(url, poolclass=NullPool, connect_args=connect_args)


PING_IDLE_S = 1.0  # a pooled connection unused this long is pinged before it is handed out


def _ping_when_idle(engine: Engine) -> None:
    """Hand out a pooled connection that sat unused for `PING_IDLE_S` only after a round trip
    proves it alive (a dead one is replaced; SQLAlchemy's `pool_pre_ping`, but not before
    every checkout: on a busy API that ping was a second round trip for every one-SELECT
    lookup). A connection that died within its last second of use fails its statement; the
    pool then drops every connection it held (SQLAlchemy's disconnect handling)."""

    @event.listens_for(engine, "checkin")
    def returned(_dbapi: Any, record: Any) -> None:
        record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def handed_out(dbapi: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("returned_at", 0.0) < PING_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi)
        except Exception as err:  # any failure: the pool discards it and connects again
            raise DisconnectionError(f"a pooled connection was dead: {err}") from err


@contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """Hold an exclusive lock on a file beside a SQLite database (nothing for ``:memory:``).

    pysqlite runs DDL outside a transaction, so two processes upgrading the same file at once
    could both see an empty database; the file lock makes the second wait for the first.
    """
    database = engine.url.database
    if not database or database == ":memory:":
        yield
        return
    with open(f"{database}.migrate-lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _lock_for_upgrade(connection: Connection) -> None:
    """On PostgreSQL, wait for any other process's upgrade (the lock ends with the transaction)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})


def upgrade_schema(engine: Engine, revision: str = "head") -> None:
    """Apply the Alembic migrations up to ``revision`` on the engine's database (idempotent).

    Safe to call from many processes at once (the API, its reaper and every worker do on
    start): upgrades are serialised by an advisory lock on PostgreSQL and a file lock on SQLite,
    so the second caller finds the schema at head and does nothing. On SQLite, foreign keys are
    off during the upgrade (a batch migration copies a table and drops the old one, which a
    referencing row would forbid) and checked whole afterwards.
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    is_sqlite = engine.url.get_backend_name() == "sqlite"
    with _sqlite_file_lock(engine) if is_sqlite else _no_lock(), engine.connect() as connection:
        if is_sqlite:  # outside any transaction, where SQLite honours it
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin():
                _lock_for_upgrade(connection)
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
        finally:
            if is_sqlite:
                connection.rollback()
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                dangling = connection.exec_driver_sql("PRAGMA foreign_key_check").first()
                connection.commit()
        if is_sqlite and dangling:
            raise RuntimeError("the schema upgrade left rows whose foreign keys dangle")


@contextmanager
def _no_lock() -> Iterator[None]:
    yield
