"""Dashboard page loads with 100,000 schedules, SQLite and PostgreSQL.

For each store it seeds a fresh database with ``--schedules`` schedules (`tests.dashboard.seed`:
matmul / conv2d / dense / user workloads on three targets, written in bulk, no TVM), serves the
app in this process (uvicorn in a thread, auth off, loopback) and times sequential requests,
``--repeat`` of each, reporting the median and the slowest:

  * ``/`` (the overview: counts, recent jobs, the fastest schedules per target);
  * ``/schedules`` newest first, sorted by GFLOPS, filtered by operator and target, and its last
    page (a deep offset);
  * ``/api/v1/schedules`` with the same sort and page size (50), for the JSON cost alone;
  * one schedule's page.

Each response is checked to hold one page of rows. The PostgreSQL database is created under
the local server (``--pg-admin``) and dropped at the end. Run it alone on the machine.

    .venv/bin/python bench/dashboard.py [--schedules 100000] [--repeat 15]
        [--stores sqlite postgresql]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedules_db import make_engine, upgrade_schema  # noqa: E402
from service.entry.app import create_app  # noqa: E402
from service.shared.settings import Settings  # noqa: E402
from tests.dashboard.seed import seed  # noqa: E402

PAGES = {
    "overview /": "/",
    "/schedules (newest)": "/schedules",
    "/schedules?sort=gflops": "/schedules?sort=gflops",
    "/schedules?operator&target&sort=speedup": (
        "/schedules?operator=matmul&target=znver4-2c&sort=speedup"
    ),
    "/schedules last page": "/schedules?sort=gflops&offset={last}",
    "API /schedules?sort=gflops&limit=50": "/api/v1/schedules?sort=gflops&limit=50",
    "/schedules/1": "/schedules/1",
}


@contextmanager
def postgres(admin_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database on the admin URL's server, dropped afterwards."""
    name = f"tunehub_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def served(settings: Settings) -> Iterator[str]:
    """The app on a free loopback port, in a thread."""
    config = uvicorn.Config(create_app(settings, run_reaper=False), host="127.0.0.1", port=0,
                            log_level="warning", proxy_headers=False)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def measure(url: str, schedules: int, repeat: int) -> dict[str, tuple[float, float, int]]:
    """(median ms, max ms, response bytes) per page."""
    found = {}
    last = (schedules - 1) // 50 * 50
    with httpx.Client(base_url=url, timeout=120) as client:
        for name, path in PAGES.items():
            path = path.format(last=last)
            times = []
            for _ in range(repeat + 1):  # the first is a warm-up
                started = time.perf_counter()
                response = client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()
            rows = response.text.count("<tr>") - 1 if "api" not in path else len(response.json())
            if "schedules" in path and not path.startswith("/schedules/") and rows > 50:
                raise AssertionError(f"{path}: {rows} rows in one page")
            found[name] = (statistics.median(times[1:]), max(times[1:]), len(response.content))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--pg-admin", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    results = {}
    for kind in args.stores:
        with (
            tempfile.TemporaryDirectory() as folder,
            postgres(args.pg_admin) if kind == "postgresql" else _sqlite(folder) as url,
        ):
            engine = make_engine(url)
            upgrade_schema(engine)
            started = time.perf_counter()
            seed(engine, args.schedules)
            took = time.perf_counter() - started
            print(f"{kind}: seeded {args.schedules} schedules in {took:.1f} s")
            if kind == "postgresql":
                with engine.begin() as conn:
                    conn.execute(text("ANALYZE"))
            engine.dispose()
            with served(Settings(data_dir=Path(folder), database_url=url)) as base:
                results[kind] = measure(base, args.schedules, args.repeat)
    kinds = list(results)
    print(f"\n{args.schedules} schedules, {args.repeat} requests each, median (max) ms:")
    print(f"| page | {' | '.join(kinds)} |")
    print(f"|---|{'---|' * len(kinds)}")
    for name in PAGES:
        cells = [f"{results[k][name][0]:.1f} ({results[k][name][1]:.1f})" for k in kinds]
        print(f"| {name} | {' | '.join(cells)} |")


@contextmanager
def _sqlite(folder: str) -> Iterator[str]:
    yield f"sqlite:///{folder}/tunehub.db"


if __name__ == "__main__":
    main()
