"""How the API's hot read routes run a store lookup: on the event loop when the database is
local, in the threadpool when it is across a network.

A threadpool hop costs ~0.2 ms of a request here (FastAPI runs every ``def`` route and
dependency in one), and on a loaded 2-core machine the hop's thread switches cost more than
they overlap. A lookup (`schedules_db.lookups`) is one indexed SELECT outside any transaction:
~0.1 ms on SQLite (WAL readers never wait on writers) and ~0.5 ms on a PostgreSQL on the same
host (MVCC: a SELECT waits on no writer, only on DDL). Measured with bench/api_load.py on this
machine, running them inline took PostgreSQL from 537 to 981 req/s (32 clients) and the p99 at
500 lookups/s from 55 to 5 ms. Across a network each round trip would hold the loop for the
whole RTT, so a store on another host is read in the threadpool.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import QueuePool
from starlette.concurrency import run_in_threadpool

from schedules_db import Store

T = TypeVar("T")


@lru_cache(maxsize=16)
def is_local(url: URL) -> bool:
    """True for SQLite and for a server on loopback or a Unix socket (no host)."""
    if url.get_backend_name() == "sqlite":
        return True
    host = url.host or str(url.query.get("host") or "")  # libpq also takes ?host=
    if host in ("", "localhost") or host.startswith("/"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


def inline_ok(engine: Engine) -> bool:
    """May a read of ``engine`` run on the event loop? Only for a local store (`is_local`)
    with a pooled connection free: waiting for one (the threadpool's ``def`` routes can hold
    the whole pool) would stall every request, so then the read takes the threadpool too."""
    if not is_local(engine.url):
        return False
    pool = engine.pool
    if not isinstance(pool, QueuePool):  # no bound on connections (NullPool, StaticPool)
        return True
    return pool.checkedout() < pool.size()


async def lookup(store: Store, read: Callable[..., T], *args: Any) -> T:
    """``read(store, *args)``: inline when `inline_ok`, else in the threadpool."""
    if inline_ok(store.engine):
        return read(store, *args)
    return await run_in_threadpool(read, store, *args)
