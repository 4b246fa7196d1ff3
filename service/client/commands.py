"""The client commands of `tunehub`: submit, status, cancel, watch, schedules, fetch, export,
import, workers, whoami, operators. Each talks to a server over HTTP through `TunehubClient`,
so they run where only the light client (httpx) is installed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from service.client.errors import Offline
from service.client.fetch import FetchedLibrary, NotTuned
from service.client.http import TunehubClient

BAR_WIDTH = 30
EXIT_NOT_TUNED = 4  # `tunehub fetch` by key: nothing verified for it (2: HTTP error, 3: sha256)
EXIT_OFFLINE = 5  # `tunehub fetch` by key: the server is unreachable and nothing is cached


def _client(args: argparse.Namespace) -> TunehubClient:
    return TunehubClient(args.server, token=args.token)


def _parse_param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param takes NAME=VALUE, got {text!r}")
    name, raw = text.split("=", 1)
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.strip(), value


def _progress_line(job: dict[str, Any]) -> str:
    progress = job["progress"]
    done, total = progress["trials_done"], job["trials"]
    filled = int(BAR_WIDTH * min(done, total) / max(total, 1))
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    best = progress["best_latency_us"]
    best_text = f"best {best:.1f} us {progress['best_gflops']:.1f} GFLOPS" if best else "best -"
    return f"\r[{bar}] {done}/{total} trials  {best_text}  {job['state']:<9}"


def _target_arg(text: str) -> str | dict[str, Any]:
    """A --target value: a JSON object's text becomes the object; names pass through."""
    if not text.strip().startswith("{"):
        return text
    target: dict[str, Any] = json.loads(text)
    return target


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit a job; with --wait, draw its progress and print the result."""
    params = dict(args.param or [])
    target = _target_arg(args.target)
    with _client(args) as client:
        who = {"priority": args.priority, "space": args.space}
        if args.tir:
            if args.operator:
                raise SystemExit("tunehub: give an operator or --tir FILE, not both")
            fmt = "json" if args.tir.endswith(".json") else "tvmscript"
            job = client.submit_tir(Path(args.tir).read_text(), fmt, target, args.trials, **who)
        elif args.operator:
            job = client.submit(args.operator, params, target, args.trials, **who)
        else:
            raise SystemExit("tunehub: give an operator name or --tir FILE")
        print(f"job {job['id']}: {job['state']}" + (" (cache hit)" if job["cache_hit"] else ""))
        if not args.wait:
            return 0
        return _follow(client, job["id"])


def _follow(client: TunehubClient, job_id: int) -> int:
    """Draw a job's progress bar from its event stream until it ends; print the result."""
    shown = [""]

    def draw(current: dict[str, Any]) -> None:
        line = _progress_line(current)
        if line != shown[0]:  # redraw only on change (logs stay readable when piped)
            print(line, end="", flush=True)
            shown[0] = line

    job = client.watch(job_id, on_progress=draw)
    print()
    if job["state"] != "succeeded":
        print(f"job {job['id']} {job['state']}: {job['error'] or ''}", file=sys.stderr)
        return 1
    sched = client.schedule(job["schedule_id"])
    print(
        f"schedule {sched['id']}: {sched['latency_us']:.2f} us, {sched['gflops']:.1f} GFLOPS, "
        f"{sched['speedup_vs_untuned']:.1f}x faster than untuned, "
        f"{sched['trials']} trials, max error {sched['max_abs_error']:.2g}, "
        f"{sched['space']} space"
    )
    for param in sched["packed_params"]:
        print(
            f"  weight {param['index']} ({param['name']}) is packed: call {param['function']} "
            f"once ({param['shape']} -> {param['packed_shape']}), then {sched['entry']} per call"
        )
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """Follow a job's progress (server-sent events) until it ends."""
    with _client(args) as client:
        return _follow(client, args.job_id)


def cmd_workers(args: argparse.Namespace) -> int:
    """Print the worker fleet."""
    with _client(args) as client:
        workers = client.workers()
    cells = [
        [
            w["name"],
            w["status"],
            ",".join(t["label"] for t in w["targets"]),
            f"job {w['current_job_id']}" if w["current_job_id"] else "idle",
            f"{w['fingerprint'].get('cpu_model', '')} (beat {w['heartbeat_age_s']} s ago)",
        ]
        for w in workers
    ]
    print(table(["name", "status", "targets", "job", "hardware"], cells))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a target's records as a MetaSchedule JSON database folder."""
    with _client(args) as client:
        summary = client.export_database(args.target, args.directory)
    print(
        f"{args.directory}: {summary['workloads']} workloads, {summary['records']} records "
        f"for {summary['target']['label']} (TVM {summary['tvm_series']})"
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Send a MetaSchedule JSON database folder measured on --target."""
    with _client(args) as client:
        summary = client.import_database(args.directory, _target_arg(args.target))
    jobs = ", ".join(str(j["id"]) for j in summary["jobs"]) or "none"
    print(
        f"{summary['workloads']} workloads, {summary['records_added']} new records "
        f"({summary['records_known']} known) for {summary['target']['label']}; "
        f"verification jobs: {jobs}"
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print a job as JSON."""
    with _client(args) as client:
        print(json.dumps(client.job(args.job_id), indent=2))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel a job."""
    with _client(args) as client:
        job = client.cancel(args.job_id)
    print(
        f"job {job['id']}: {job['state']}"
        + (" (cancel requested)" if job["state"] == "running" else "")
    )
    return 0


def table(header: list[str], rows: list[list[str]], right: AbstractSet[int] = frozenset()) -> str:
    """``rows`` under ``header``, each column as wide as its widest cell (``right``: the
    indices of right-aligned columns), so long parameters never push a row out of line."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = []
    for row in (header, *rows):
        cells = [
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def cmd_schedules(args: argparse.Namespace) -> int:
    """List verified best schedules."""
    with _client(args) as client:
        rows = client.schedules(args.operator, args.target)
    header = ["id", "operator", "params", "target", "latency_us", "GFLOPS", "speedup", "trials",
              "space"]  # fmt: skip
    cells = [
        [
            str(s["id"]),
            s["workload"]["operator"] or "-",
            ",".join(f"{k}={v}" for k, v in s["workload"]["params"].items()),
            s["target"]["label"],
            f"{s['latency_us']:.2f}",
            f"{s['gflops']:.1f}" if s["gflops"] is not None else "-",
            f"{s['speedup_vs_untuned']:.1f}x",
            str(s["trials"]),
            s["space"],
        ]
        for s in rows
    ]
    print(table(header, cells, right={0, 4, 5, 6, 7}))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """Download a schedule's shared library (sha256-checked), or its JSON with --schedule; by
    key (--operator/--workload and --target), the verified best through the library cache."""
    if args.schedule_id is None:
        return _fetch_key(args)
    if args.operator or args.workload or args.tune_if_missing:
        raise SystemExit("tunehub fetch: give a SCHEDULE_ID or a key (--operator/--workload)")
    with _client(args) as client:
        if args.schedule:
            text = json.dumps(client.schedule(args.schedule_id), indent=2)
            Path(args.output).write_text(text) if args.output else print(text)
            return 0
        output = args.output or f"schedule{args.schedule_id}.so"
        sha = client.download_artifact(args.schedule_id, output)
    print(f"{output}: sha256 {sha}")
    return 0


def _fetch_key(args: argparse.Namespace) -> int:
    """`tunehub fetch --operator ... | --workload ...`: exit `EXIT_NOT_TUNED` when nothing is
    tuned (unless --tune-if-missing --wait tunes it first), `EXIT_OFFLINE` when the server is
    unreachable and nothing is cached."""
    if (args.operator is None) == (args.workload is None):
        raise SystemExit("tunehub fetch: give a SCHEDULE_ID, --operator NAME or --workload HASH")
    if args.target is None:
        raise SystemExit("tunehub fetch: --target is required with --operator or --workload")
    if args.schedule or (args.tune_if_missing and args.workload):
        raise SystemExit(
            "tunehub fetch: --schedule takes a SCHEDULE_ID; --tune-if-missing an operator"
        )
    params = dict(args.param or [])
    output = args.output or "tunehub-library.so"
    with _client(args) as client:
        try:
            fetched = _fetch(client, args, params, output)
        except NotTuned as missing:
            print(f"tunehub: {missing.detail}", file=sys.stderr)
            if not args.tune_if_missing:
                print(_how_to_tune(args, params), file=sys.stderr)
                return EXIT_NOT_TUNED
            job = client.submit(args.operator, params, _target_arg(args.target), args.trials)
            print(f"job {job['id']}: {job['state']}" + (" (cache hit)" if job["cache_hit"] else ""))
            if not args.wait:
                print(f"  follow it with `tunehub watch {job['id']}`, then fetch again")
                return EXIT_NOT_TUNED
            if _follow(client, job["id"]) != 0:
                return 1
            fetched = _fetch(client, args, params, output)
        except Offline as err:
            print(f"tunehub: {err}", file=sys.stderr)
            return EXIT_OFFLINE
    for note in fetched.notes:
        print(note, file=sys.stderr)
    origin = " (offline, cached)" if fetched.offline else " (cached)" if fetched.from_cache else ""
    print(f"{fetched.path}: sha256 {fetched.sha256}, schedule {fetched.schedule_id}{origin}")
    return 0


def _fetch(
    client: TunehubClient, args: argparse.Namespace, params: dict[str, Any], output: str
) -> FetchedLibrary:
    return client.fetch_library(args.target, output, args.operator, params, args.workload)


def _how_to_tune(args: argparse.Namespace, params: dict[str, Any]) -> str:
    if args.workload:
        return (
            "  tune it by operator: tunehub fetch --operator NAME --param K=V ... "
            "--tune-if-missing --wait"
        )
    flags = " ".join(
        f"--param {k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in params.items()
    )
    return (
        f"  tune it: tunehub submit {args.operator} {flags} --target '{args.target}' --wait\n"
        f"  or add --tune-if-missing --wait to this command"
    )


def cmd_whoami(args: argparse.Namespace) -> int:
    """Print who the token is (GET /me)."""
    with _client(args) as client:
        me = client.me()
    expires = me["expires_at"] or "never"
    print(
        f"{me['identity']}: {', '.join(me['scopes'])} (token {me['token_id']}, expires {expires})"
    )
    return 0


def cmd_operators(args: argparse.Namespace) -> int:
    """Print the operator catalog."""
    with _client(args) as client:
        for op in client.operators():
            params = ", ".join(op["params_schema"].get("properties", {}))
            dtypes = "/".join(op.get("dtypes", []))
            print(f"{op['name']:<18} {dtypes:<22} {op['description']}  [{params}]")
    return 0


def server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", help="tunehub URL (default $TUNEHUB_URL or http://127.0.0.1:8000)")
    p.add_argument("--token", help="API token (default $TUNEHUB_TOKEN)")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the client commands to the `tunehub` parser; each sets ``func`` (args -> status)."""
    p = sub.add_parser("submit", help="submit a tuning job")
    p.add_argument("operator", nargs="?", help="a catalog operator (see `tunehub operators`)")
    p.add_argument("--tir", metavar="FILE", help="a raw TIR function: TVMScript, or .json")
    p.add_argument("--param", action="append", type=_parse_param, help="NAME=VALUE")
    p.add_argument("--target", default="host")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--wait", action="store_true", help="follow progress until the job ends")
    p.add_argument("--priority", type=int, default=0, help="higher runs first (-100..100)")
    p.add_argument(
        "--space",
        choices=("auto", "plain", "packed"),
        default="auto",
        help="search space (auto: packed weights on CPU where the operator has them)",
    )
    p.add_argument("--submitted-by", help=argparse.SUPPRESS)  # ignored: the token says who
    server_options(p)
    p.set_defaults(func=cmd_submit)

    for name, func, help_text in (
        ("status", cmd_status, "show a job"),
        ("cancel", cmd_cancel, "cancel a job"),
        ("watch", cmd_watch, "follow a job's progress until it ends"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("job_id", type=int)
        server_options(p)
        p.set_defaults(func=func)

    p = sub.add_parser("schedules", help="list verified best schedules")
    p.add_argument("--operator")
    p.add_argument("--target", help="key, label or 'host'")
    server_options(p)
    p.set_defaults(func=cmd_schedules)

    p = sub.add_parser(
        "fetch",
        help="download a compiled library: by schedule id, or a key's verified best (cached)",
        description="Download a schedule's library by id, or the verified best of a key "
        "(--operator with --param, or --workload, and --target) through the cache in "
        "$XDG_CACHE_HOME/tunehub (~/.cache/tunehub): an unchanged library is not downloaded "
        "again and an unreachable server is answered from the cache. Exit status: 0 done, "
        "2 refused (HTTP error), 3 sha256 mismatch, 4 nothing tuned for the key, 5 server "
        "unreachable and nothing cached.",
    )
    p.add_argument("schedule_id", type=int, nargs="?")
    p.add_argument(
        "-o",
        "--output",
        help="where to write it (default: schedule<ID>.so, or tunehub-library.so by key)",
    )
    p.add_argument("--schedule", action="store_true", help="fetch the schedule JSON instead")
    p.add_argument("--operator", help="a catalog operator (see `tunehub operators`)")
    p.add_argument("--param", action="append", type=_parse_param, help="NAME=VALUE")
    p.add_argument("--workload", metavar="HASH", help="a workload's structural hash instead")
    p.add_argument("--target", help="key, label, 'host' (the server's) or JSON")
    p.add_argument(
        "--tune-if-missing", action="store_true", help="submit a job when nothing is tuned"
    )
    p.add_argument("--trials", type=int, default=64, help="trials of that job")
    p.add_argument("--wait", action="store_true", help="wait for that job, then fetch")
    server_options(p)
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("export", help="write a target's records as a MetaSchedule JSONDatabase")
    p.add_argument("directory")
    p.add_argument("--target", required=True, help="key, label, 'host' or JSON")
    server_options(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="load a MetaSchedule JSONDatabase folder for a target")
    p.add_argument("directory")
    p.add_argument("--target", required=True, help="what it was measured on: 'host', label, JSON")
    server_options(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("workers", help="list the worker fleet")
    server_options(p)
    p.set_defaults(func=cmd_workers)

    p = sub.add_parser("whoami", help="who the token is and what it may do")
    server_options(p)
    p.set_defaults(func=cmd_whoami)

    p = sub.add_parser("operators", help="list the operator catalog")
    server_options(p)
    p.set_defaults(func=cmd_operators)
